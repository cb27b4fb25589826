# A tiny FUSE filesystem on /dev/fuse (no libfuse) holding one file,
# `disk.img`, whose bytes are those of the image file argv[2], read with
# no page cache (direct I/O) so that every read reaches this server. Once
# the file argv[3] exists, reads are never answered: what a disk image on
# a network filesystem, or a network block device (NBD, iSCSI, RBD), does
# when its server stops answering.
import ctypes, os, struct, sys, time
target, image, stall = sys.argv[1], sys.argv[2], sys.argv[3]
backing = os.open(image, os.O_RDONLY)
size = os.fstat(backing).st_size
fd = os.open("/dev/fuse", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
if libc.mount(b"diskfs", target.encode(), b"fuse", 0, opts) != 0:
    raise OSError(ctypes.get_errno(), "mount")
ROOT, DISK = 1, 2
def attr(ino):
    now = int(time.time())
    if ino == ROOT:
        mode, length, nlink = 0o40755, 0, 2
    else:
        mode, length, nlink = 0o100644, size, 1
    return struct.pack("<QQQQQQIIIIIIIIII", ino, length, (length + 511) // 512, now, now, now,
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
        if node == ROOT and name == b"disk.img":
            reply(unique, 0, struct.pack("<QQQQII", DISK, 0, 3600, 3600, 0, 0) + attr(DISK))
        else:
            reply(unique, 2)
    elif opcode == 3:  # GETATTR
        reply(unique, 0, struct.pack("<QII", 3600, 0, 0) + attr(node))
    elif opcode in (14, 27):  # OPEN, OPENDIR: FOPEN_DIRECT_IO for the file
        reply(unique, 0, struct.pack("<QIi", 0, 1 if opcode == 14 else 0, 0))
    elif opcode == 15:  # READ
        if os.path.exists(stall):
            continue  # never answered
        fh, offset, want = struct.unpack_from("<QQI", body)
        reply(unique, 0, os.pread(backing, want, offset))
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
