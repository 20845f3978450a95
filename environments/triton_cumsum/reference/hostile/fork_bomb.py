"""Fork until the container's process limit says no, keep the children, then give up."""
import os
import time

kids = 0
while kids < 100_000:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    kids += 1
print(f"forked {kids} children before the limit")
os._exit(1)
