# A tiny FUSE filesystem on /dev/fuse (no libfuse): one directory holding
# `slowN.txt` for any number N. Every request is answered at once, but once
# a file has been opened, the attribute requests on it (an fstat of the
# open file) are never answered: a stat of it waits for ever.
import ctypes, os, struct, sys, time
target = sys.argv[1]
content = b"slow file content\n"
fd = os.open("/dev/fuse", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
if libc.mount(b"hangfs", target.encode(), b"fuse", 0, opts) != 0:
    raise OSError(ctypes.get_errno(), "mount")
ROOT = 1
opened = set()
def attr(ino):
    now = int(time.time())
    if ino == ROOT:
        mode, size, nlink = 0o40755, 0, 2
    else:
        mode, size, nlink = 0o100644, len(content), 1
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, (size + 511) // 512, now, now, now,
                       0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)
def reply(unique, error=0, data=b""):
    os.write(fd, struct.pack("<IiQ", 16 + len(data), -error, unique) + data)
print("mounted", flush=True)
while True:
    try:
        request = os.read(fd, 1 << 20)
    except OSError:
        break
    length, opcode, unique, node = struct.unpack_from("<IIQQ", request)
    body = request[40:length]
    if opcode == 26:  # INIT
        major, minor, readahead, flags = struct.unpack_from("<IIII", body)
        out = struct.pack("<IIIIHHIIHHII", 7, 31, readahead, 0, 16, 12, 131072, 1, 32, 0, 0, 0)
        reply(unique, 0, out.ljust(64, b"\0"))
    elif opcode == 1:  # LOOKUP
        name = body.split(b"\0")[0]
        if node == ROOT and name.startswith(b"slow") and name.endswith(b".txt") and name[4:-4].isdigit():
            ino = 100 + int(name[4:-4])
            reply(unique, 0, struct.pack("<QQQQII", ino, 0, 3600, 0, 0, 0) + attr(ino))
        else:
            reply(unique, 2)
    elif opcode == 3:  # GETATTR
        if node in opened:
            continue  # never answered
        reply(unique, 0, struct.pack("<QII", 0, 0, 0) + attr(node))
    elif opcode in (14, 27):  # OPEN, OPENDIR
        if opcode == 14 and node != ROOT:
            opened.add(node)
        reply(unique, 0, struct.pack("<QIi", 0, 0, 0))
    elif opcode == 15:  # READ
        fh, offset, size = struct.unpack_from("<QQI", body)
        reply(unique, 0, content[offset:offset + size])
    elif opcode == 28:  # READDIR
        reply(unique, 0, b"")
    elif opcode in (18, 25, 29):  # RELEASE, FLUSH, RELEASEDIR
        reply(unique, 0)
    elif opcode in (2, 42, 36):  # FORGET, BATCH_FORGET, INTERRUPT: no answer
        continue
    elif opcode == 38:  # DESTROY
        reply(unique, 0)
        break
    else:
        reply(unique, 38)  # ENOSYS
