#!/usr/bin/env python3
"""Prints the median and mean of every criterion benchmark under the target
directory's criterion/ ($CARGO_TARGET_DIR, else target/ at the workspace root),
and for benchmarks with a throughput the elements per second at the median."""
import json
import os
import pathlib

target = os.environ.get("CARGO_TARGET_DIR")
root = (
    pathlib.Path(target) if target else pathlib.Path(__file__).resolve().parents[2] / "target"
) / "criterion"
for estimates in sorted(root.glob("*/*/new/estimates.json")):
    data = json.loads(estimates.read_text())
    group, bench = estimates.parts[-4], estimates.parts[-3]
    median = data["median"]["point_estimate"] / 1000
    mean = data["mean"]["point_estimate"] / 1000
    line = f"{group}/{bench:55} median {median:9.2f} us   mean {mean:9.2f} us"
    # Benchmarks with a throughput: also elements (calls) per second.
    meta = estimates.with_name("benchmark.json")
    throughput = json.loads(meta.read_text()).get("throughput") if meta.exists() else None
    if throughput and "Elements" in throughput:
        line += f"   {throughput['Elements'] / median * 1e6:9.0f} elements/s (median)"
    print(line)
