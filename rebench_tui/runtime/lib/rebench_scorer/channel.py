"""Framed JSON messages, with file descriptors, over a Unix socket.

The scorer and the participant's process talk only through this: a 4-byte length, then that many
bytes of JSON (an object). File descriptors (shared memory) ride along as SCM_RIGHTS. The reading
side bounds every message (a hostile peer cannot make the scorer allocate gigabytes) and every
wait (it cannot hang the scorer).
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from typing import Any

FD_VARIABLE = "REBENCH_CONTROL_FD"
MAX_MESSAGE = 4 << 20
MAX_FDS = 64


class ChannelError(Exception):
    """The peer broke the protocol, went away, or did not answer in time."""


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()
        self._fds: list[int] = []

    @classmethod
    def from_env(cls) -> "Channel":
        """The participant's side: the socket the scorer passed down."""
        value = os.environ.get(FD_VARIABLE)
        if value is None or not value.isdigit():
            raise ChannelError(f"{FD_VARIABLE} is not set: this process was not started by a scorer")
        return cls(socket.socket(fileno=int(value)))

    def send(self, obj: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        body = json.dumps(obj, allow_nan=True).encode()
        if len(body) > MAX_MESSAGE:
            raise ChannelError(f"message of {len(body)} bytes is over the {MAX_MESSAGE}-byte limit")
        frame = struct.pack(">I", len(body)) + body
        try:
            if fds:
                sent = socket.send_fds(self.sock, [frame], list(fds))
                frame = frame[sent:]
            if frame:
                self.sock.sendall(frame)
        except OSError as exc:
            raise ChannelError(f"the other side went away ({exc})") from None

    def _fill(self, want: int, deadline: float | None) -> None:
        while len(self._buf) < want:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelError("no answer in time")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, MAX_FDS)
            except TimeoutError:
                raise ChannelError("no answer in time") from None
            except OSError as exc:
                raise ChannelError(f"the other side went away ({exc})") from None
            self._fds.extend(fds)
            if not data:
                raise ChannelError("the other side closed the channel")
            self._buf += data

    def wait(self, spin: float) -> None:
        """Spin (no sleeping) until a message may be read or ``spin`` seconds have passed: a
        timed exchange on a GPU then pays no wake-up from a sleeping ``recv`` (measured at about
        0.3-0.5 ms on an H100 host, per message). Costs one busy CPU while it spins."""
        if self._buf:
            return
        until = time.monotonic() + spin
        while time.monotonic() < until:
            if select.select([self.sock], [], [], 0)[0]:
                return

    def recv(self, timeout: float | None = None) -> tuple[dict[str, Any], list[int]]:
        """One message and the descriptors that came with it (since the previous message)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._fill(4, deadline)
        (size,) = struct.unpack(">I", self._buf[:4])
        if size > MAX_MESSAGE:
            raise ChannelError(f"the other side sent a message of {size} bytes (limit {MAX_MESSAGE})")
        self._fill(4 + size, deadline)
        body = bytes(self._buf[4:4 + size])
        del self._buf[:4 + size]
        fds, self._fds = self._fds, []
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            for fd in fds:
                os.close(fd)
            raise ChannelError("the other side sent something that is not JSON") from None
        if not isinstance(obj, dict):
            for fd in fds:
                os.close(fd)
            raise ChannelError("the other side sent JSON that is not an object")
        return obj, fds

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
