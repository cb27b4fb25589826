#!/usr/bin/env python3
"""Prints the median and mean of every criterion benchmark under target/criterion."""
import json
import pathlib

root = pathlib.Path(__file__).resolve().parents[2] / "target" / "criterion"
for estimates in sorted(root.glob("*/*/new/estimates.json")):
    data = json.loads(estimates.read_text())
    group, bench = estimates.parts[-4], estimates.parts[-3]
    median = data["median"]["point_estimate"] / 1000
    mean = data["mean"]["point_estimate"] / 1000
    print(f"{group}/{bench:55} median {median:9.2f} us   mean {mean:9.2f} us")
