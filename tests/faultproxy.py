"""A fault-injecting TCP proxy for the multi-process tests.

`FaultProxy(target)` listens on 127.0.0.1 (an ephemeral port, `.address`)
and forwards every connection it accepts to `target`, in one selector
thread. Faults are switched on while it runs, by a method call, at once
or once a connection's stream has carried N bytes (`after=N`, counted
from the connection's start in that direction):

- `delay(seconds)`: every byte read is held that long before it goes on;
- `stall()` / `resume()`: stop forwarding (reading too, so the senders'
  socket buffers fill) and keep the connections open;
- `drop(nbytes=None)`: discard the next `nbytes` read (all while on);
- `truncate(after)`: close both sides (FIN) once `after` bytes passed;
- `flip(offset, bit)`: flip one bit of the byte at `offset`;
- `inject(data)`: insert bytes into the stream now;
- `reset(after=None)`: close both sides with RST (SO_LINGER 0);
- `blackhole()`: read and discard everything, never answer; connections
  accepted from then on are not even forwarded.

Directions: "up" is client to target (what the dialler sends), "down"
target to client, "both" either. For Tether's frames (56-byte headers,
crates/tether-proto/src/wire.rs), `on_frame(match, action)` edits the
first frame whose header `match(Header)` accepts, in any direction of
any connection, at a frame boundary: `action(frame_bytes)` returns the
bytes to send instead, or an `Edit` (bytes, then "reset" or "close").

Connections are recorded in `.connections` with the bytes each direction
carried, so a test can tell which proxy carries a live link.
"""

import selectors
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field

HEADER_LEN = 56
HIGH_WATER = 4 << 20  # bytes buffered per direction before reading pauses


@dataclass
class Header:
    """A Tether frame header, decoded without checks."""

    magic: bytes
    version: int
    kind: int
    flags: int
    seq: int
    payload_len: int
    context: int
    tag: int
    msg_size: int
    sender_req: int
    receiver_req: int

    FORMAT = "<4sHBBQQIiQQQ"

    @classmethod
    def decode(cls, raw):
        return cls(*struct.unpack(cls.FORMAT, raw[:HEADER_LEN]))

    def encode(self):
        return struct.pack(self.FORMAT, self.magic, self.version, self.kind, self.flags, self.seq, self.payload_len,
                           self.context, self.tag, self.msg_size, self.sender_req, self.receiver_req)


# Tether frame kinds (wire.rs FrameKind).
HELLO, HELLO_ACK, HELLO_REJECT, EAGER, RTS, CTS, DATA, BYE, ABORT = range(1, 10)


@dataclass
class Edit:
    """What `on_frame`'s action returns: bytes to send instead of the
    frame, then optionally "reset" or "close" the connection once `after`
    more bytes of that direction were forwarded."""

    data: bytes
    then: str = None
    after: int = 0


@dataclass
class _FrameRule:
    match: object
    action: object
    whole: bool
    hits: int = 0


class _Direction:
    """One direction of a proxied connection: src is read, dst written."""

    def __init__(self, name, src, dst):
        self.name = name
        self.src, self.dst = src, dst
        self.read = 0  # bytes read from src (offsets of `after`, flip)
        self.written = 0  # bytes written to dst
        self.out = deque()  # (time due, bytes)
        self.buffered = 0
        self.eof = False  # src ended; dst is shut once out is empty
        self.shut = False
        # Frame tracking (for on_frame): bytes of the header being read,
        # payload bytes still to pass, the frame held for an action.
        self.head = b""
        self.head_sent = False
        self.payload_left = 0
        self.held = None  # (rule, bytearray of the frame so far, total length)
        self.frames = 0
        self.then = None  # (offset in `written`, "reset" | "close")


@dataclass
class Connection:
    client: socket.socket
    server: socket.socket = None
    up: _Direction = None
    down: _Direction = None
    opened: float = field(default_factory=time.monotonic)
    closed: bool = False
    how: str = ""  # how it ended: "eof", "reset", "truncated", "error: ..."

    @property
    def carried(self):
        return (self.up.read if self.up else 0) + (self.down.read if self.down else 0)


class FaultProxy:
    def __init__(self, target, name="proxy", listen_port=0, frames=True):
        self.target = target
        # Track Tether frame boundaries from each connection's start (so
        # that on_frame, armed at any time, finds them).
        self.track_frames = frames
        self.name = name
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", listen_port))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()
        self.connections = []
        self.lock = threading.RLock()
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.thread = None
        self.running = False
        # Faults, per direction name.
        self.delays = {"up": 0.0, "down": 0.0}
        self.stalled = {"up": False, "down": False}
        self.dropping = {"up": 0, "down": 0}  # bytes still to drop; -1: all
        self.flips = {"up": [], "down": []}  # (offset, bit)
        self.cuts = {"up": [], "down": []}  # (offset, "close" | "reset")
        self.frame_rules = []
        self.holed = False
        self.error = None  # an exception that stopped the loop

    # --- life cycle -------------------------------------------------------

    def start(self):
        self.running = True
        self.sel.register(self.listener, selectors.EVENT_READ, ("listen", None))
        self.sel.register(self.wake_r, selectors.EVENT_READ, ("wake", None))
        self.thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.running = False
        self._wake()
        if self.thread:
            self.thread.join(5)
        for c in self.connections:
            self._close(c, "stopped")
        self.listener.close()
        self.wake_r.close()
        self.wake_w.close()
        self.sel.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        return f"{self.address[0]}:{self.address[1]}"

    # --- faults -----------------------------------------------------------

    @staticmethod
    def _dirs(direction):
        assert direction in ("up", "down", "both"), direction
        return ("up", "down") if direction == "both" else (direction,)

    def _set(self, fn):
        with self.lock:
            fn()
        self._wake()

    def delay(self, seconds, direction="both"):
        def go():
            for d in self._dirs(direction):
                self.delays[d] = seconds
        self._set(go)

    def stall(self, direction="both"):
        def go():
            for d in self._dirs(direction):
                self.stalled[d] = True
        self._set(go)

    def resume(self, direction="both"):
        def go():
            for d in self._dirs(direction):
                self.stalled[d] = False
                self.dropping[d] = 0
            self.holed = False
        self._set(go)

    def drop(self, nbytes=None, direction="both"):
        def go():
            for d in self._dirs(direction):
                self.dropping[d] = -1 if nbytes is None else nbytes
        self._set(go)

    def truncate(self, after, direction="both"):
        """Closes the connection (FIN both ways) once `after` bytes of the
        direction were read (from the connection's start)."""
        self._cut(after, "close", direction)

    def reset(self, after=None, direction="both"):
        """Resets every connection now (after=None) or once `after` bytes
        of the direction were read."""
        if after is None:
            with self.lock:
                for c in list(self.connections):
                    self._reset(c)
            self._wake()
        else:
            self._cut(after, "reset", direction)

    def _cut(self, after, how, direction):
        def go():
            for d in self._dirs(direction):
                self.cuts[d].append((after, how))
        self._set(go)

    def flip(self, offset, bit=0, direction="both"):
        def go():
            for d in self._dirs(direction):
                self.flips[d].append((offset, bit))
        self._set(go)

    def inject(self, data, direction="up"):
        """Inserts `data` into the streams of the direction now (between
        two reads: not at a frame boundary; see on_frame for that)."""
        def go():
            for c in self.connections:
                for d in self._pair(c):
                    if d and d.name in self._dirs(direction) and not c.closed:
                        self._queue(d, data)
        self._set(go)

    def blackhole(self):
        """Reads and discards everything from now on; connections accepted
        later are not forwarded either."""
        def go():
            self.holed = True
        self._set(go)

    def on_frame(self, match, action, whole=True):
        """Arms a one-shot edit of the first Tether frame whose header
        `match(Header)` accepts (any direction, any connection). With
        `whole`, the frame is held until complete and action(bytes of the
        whole frame) decides; else action(header bytes) replaces only the
        header and the payload passes as it comes. Returns the rule; its
        `hits` says whether it fired."""
        rule = _FrameRule(match, action, whole)
        self._set(lambda: self.frame_rules.append(rule))
        return rule

    def live(self):
        """Connections still open that carried bytes."""
        with self.lock:
            return [c for c in self.connections if not c.closed and c.carried]

    # --- the loop ---------------------------------------------------------

    def _wake(self):
        try:
            self.wake_w.send(b"x")
        except OSError:
            pass

    @staticmethod
    def _pair(c):
        return (c.up, c.down)

    def _loop(self):
        try:
            while self.running:
                timeout = self._next_due()
                events = self.sel.select(timeout)
                with self.lock:
                    for key, mask in events:
                        what, conn = key.data
                        if what == "listen":
                            self._accept()
                        elif what == "wake":
                            try:
                                self.wake_r.recv(4096)
                            except BlockingIOError:
                                pass
                        elif not conn.closed:
                            self._service(conn, key.fileobj, mask)
                    for c in self.connections:
                        if not c.closed:
                            self._pump(c)
                    self.connections = [c for c in self.connections if not c.closed] + \
                        [c for c in self.connections if c.closed][-64:]
        except Exception as e:  # kept for the test to see
            self.error = e
            raise

    def _next_due(self):
        with self.lock:
            dues = [d.out[0][0] for c in self.connections if not c.closed for d in self._pair(c)
                    if d and d.out and not self.stalled[d.name]]
        if not dues:
            return 0.2
        return max(0.0, min(dues) - time.monotonic())

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except BlockingIOError:
                return
            client.setblocking(False)
            conn = Connection(client)
            self.connections.append(conn)
            if self.holed:
                conn.how = "blackholed"
                self.sel.register(client, selectors.EVENT_READ, ("conn", conn))
                continue
            server = socket.socket()
            server.setblocking(False)
            try:
                server.connect(self.target)
            except BlockingIOError:
                pass
            except OSError as e:
                server.close()
                self._reset_socket(client)
                conn.closed, conn.how = True, f"error: connect {e}"
                continue
            conn.server = server
            conn.up = _Direction("up", client, server)
            conn.down = _Direction("down", server, client)
            self.sel.register(client, selectors.EVENT_READ, ("conn", conn))
            self.sel.register(server, selectors.EVENT_READ | selectors.EVENT_WRITE, ("conn", conn))

    def _service(self, conn, sock, mask):
        if conn.server is None:  # blackholed at accept
            self._discard(conn, sock)
            return
        if mask & selectors.EVENT_READ:
            d = conn.up if sock is conn.client else conn.down
            self._read(conn, d)

    def _discard(self, conn, sock):
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError as e:
            self._close(conn, f"error: {e}")
            return
        if not data:
            self._close(conn, "eof")

    def _read(self, conn, d):
        if conn.closed or d.eof:
            return
        if self.holed:
            self._discard(conn, d.src)
            return
        if self.stalled[d.name] or d.buffered >= HIGH_WATER:
            return
        try:
            data = d.src.recv(1 << 18)
        except BlockingIOError:
            return
        except ConnectionResetError:
            self._reset(conn, "reset by peer")
            return
        except OSError as e:
            self._reset(conn, f"error: {e}")
            return
        if not data:
            d.eof = True
            return
        self._take(conn, d, bytearray(data))

    def _take(self, conn, d, data):
        """Applies the byte faults to what was read and queues the rest."""
        start = d.read
        d.read += len(data)
        for offset, bit in list(self.flips[d.name]):
            if start <= offset < d.read:
                data[offset - start] ^= 1 << bit
                self.flips[d.name].remove((offset, bit))
        for at, how in sorted(self.cuts[d.name]):
            if at <= d.read:
                self.cuts[d.name].remove((at, how))
                keep = max(0, at - start)
                data = data[:keep]
                d.then = (d.written + d.buffered + len(data), how)
                break
        if self.dropping[d.name]:
            n = len(data) if self.dropping[d.name] < 0 else min(len(data), self.dropping[d.name])
            if self.dropping[d.name] > 0:
                self.dropping[d.name] -= n
            data = data[n:]
        if self.track_frames:
            self._frames(conn, d, data)
        else:
            self._queue(d, bytes(data))

    def _frames(self, conn, d, data):
        """Tracks Tether frame boundaries and applies armed frame rules."""
        i = 0
        n = len(data)
        while i < n:
            if d.held is not None:
                rule, buf, total = d.held
                take = min(n - i, total - len(buf))
                buf += data[i:i + take]
                i += take
                if len(buf) == total:
                    d.held = None
                    self._apply(conn, d, rule, bytes(buf))
                continue
            if d.payload_left:
                take = min(n - i, d.payload_left)
                self._queue(d, bytes(data[i:i + take]))
                d.payload_left -= take
                i += take
                continue
            take = min(n - i, HEADER_LEN - len(d.head))
            chunk = bytes(data[i:i + take])
            if not d.head:
                # A header starts: held until whole only while a rule may
                # want it, else passed on at once.
                d.head_sent = not self.frame_rules
            d.head += chunk
            if d.head_sent:
                self._queue(d, chunk)
            i += take
            if len(d.head) < HEADER_LEN:
                continue
            head, d.head = d.head, b""
            header = Header.decode(head)
            d.frames += 1
            if d.head_sent:
                d.payload_left = header.payload_len
                continue
            rule = next((r for r in self.frame_rules if r.hits == 0 and r.match(header)), None)
            if rule is None:
                self._queue(d, head)
                d.payload_left = header.payload_len
                continue
            rule.hits += 1
            self.frame_rules.remove(rule)
            if rule.whole and header.payload_len <= HIGH_WATER:
                d.held = (rule, bytearray(head), HEADER_LEN + header.payload_len)
                if header.payload_len == 0:
                    d.held = None
                    self._apply(conn, d, rule, head)
            else:
                self._apply(conn, d, rule, head)
                d.payload_left = header.payload_len

    def _apply(self, conn, d, rule, frame):
        out = rule.action(frame)
        if not isinstance(out, Edit):
            out = Edit(out)
        self._queue(d, out.data)
        if out.then:
            d.then = (d.written + d.buffered + out.after, out.then)

    def _queue(self, d, data):
        if not data:
            return
        d.out.append((time.monotonic() + self.delays[d.name], data))
        d.buffered += len(data)

    def _pump(self, conn):
        """Writes what is due, carries out a pending cut, ends half-closed
        directions."""
        now = time.monotonic()
        for d in self._pair(conn):
            if d is None or conn.closed:
                continue
            while d.out and not self.stalled[d.name] and not self.holed and d.out[0][0] <= now:
                due, data = d.out[0]
                limit = len(data)
                if d.then:
                    limit = min(limit, d.then[0] - d.written)
                if limit > 0:
                    try:
                        sent = d.dst.send(data[:limit])
                    except BlockingIOError:
                        break
                    except OSError as e:
                        self._reset(conn, f"error: {e}")
                        return
                else:
                    sent = 0
                d.written += sent
                d.buffered -= sent
                if sent == len(data):
                    d.out.popleft()
                else:
                    d.out[0] = (due, data[sent:])
                if d.then and d.written >= d.then[0]:
                    break
                if sent < limit:
                    break
            if d.then and d.written >= d.then[0]:
                how = d.then[1]
                d.then = None
                if how == "reset":
                    self._reset(conn, "reset")
                else:
                    self._close(conn, "truncated")
                return
            if d.eof and not d.out and not d.shut:
                d.shut = True
                try:
                    d.dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        if conn.up and conn.up.shut and conn.down.shut:
            self._close(conn, "eof")
            return
        # Interest: read a source only when its direction may take more;
        # write interest while output waits.
        if not conn.closed and conn.server is not None:
            for sock, rd, wr in ((conn.client, conn.up, conn.down), (conn.server, conn.down, conn.up)):
                mask = 0
                if not rd.eof and (self.holed or (not self.stalled[rd.name] and rd.buffered < HIGH_WATER)):
                    mask |= selectors.EVENT_READ
                if wr.out and wr.out[0][0] <= time.monotonic() and not self.stalled[wr.name] and not self.holed:
                    mask |= selectors.EVENT_WRITE
                self._interest(sock, mask, conn)

    def _interest(self, sock, mask, conn):
        try:
            registered = self.sel.get_key(sock).events
        except KeyError:
            registered = 0
        if mask == registered:
            return
        if not mask:
            self.sel.unregister(sock)
        elif not registered:
            self.sel.register(sock, mask, ("conn", conn))
        else:
            self.sel.modify(sock, mask, ("conn", conn))

    # --- ending connections -----------------------------------------------

    @staticmethod
    def _reset_socket(sock):
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        sock.close()

    def _reset(self, conn, how="reset"):
        if conn.closed:
            return
        for s in (conn.client, conn.server):
            if s is not None:
                try:
                    self.sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                self._reset_socket(s)
        conn.closed, conn.how = True, how

    def _close(self, conn, how):
        if conn.closed:
            return
        for s in (conn.client, conn.server):
            if s is not None:
                try:
                    self.sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                s.close()
        conn.closed, conn.how = True, how
