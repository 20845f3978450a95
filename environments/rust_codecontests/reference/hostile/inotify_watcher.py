"""The participant's helper for solve_open_beacons: started from their shell before a scoring, it
makes sixteen world-readable files in /tmp/rcc_beacons and writes the name of every one opened
(inotify IN_OPEN on the folder) into ~/.cache/leaked/opens, one per line."""
import ctypes
import os
import struct

BEACONS = "/tmp/rcc_beacons"
OUT = os.path.expanduser("~/.cache/leaked")
os.makedirs(BEACONS, exist_ok=True)
os.chmod(BEACONS, 0o755)
for i in range(16):
    path = os.path.join(BEACONS, f"{i:x}")
    with open(path, "w") as fh:
        fh.write("beacon\n")
    os.chmod(path, 0o644)
os.makedirs(OUT, exist_ok=True)
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
libc.inotify_add_watch(fd, BEACONS.encode(), 0x20)  # IN_OPEN
with open(os.path.join(OUT, "ready"), "w"):
    pass
while True:
    data = os.read(fd, 65536)
    names = []
    while data:
        _wd, _mask, _cookie, length = struct.unpack("iIII", data[:16])
        names.append(data[16:16 + length].rstrip(b"\0").decode())
        data = data[16 + length:]
    with open(os.path.join(OUT, "opens"), "a") as fh:
        fh.write("".join(n + "\n" for n in names))
