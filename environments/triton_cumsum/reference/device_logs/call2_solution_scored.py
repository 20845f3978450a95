"""Reference solution for triton_cumsum: a single-pass Triton scan with decoupled look-back.

    y[i] = sum of x[j] for j <= i such that the number of positive values in x[0:j]
           (strictly before j) is odd.

Algorithm (one kernel launch, one read of x and one write of y):

* Each program takes a tile of BLOCK consecutive elements. Its tile index comes from an atomic
  ticket counter (not from program_id), so a tile only ever waits on tiles whose programs are
  already running: no dead-lock whatever order the hardware schedules programs in.
* For a tile the summary is (P, S, T): P = parity of its positives, S = sum of x at positions
  whose parity of positives *before them inside the tile* is odd, T = sum of all x. Entering a
  tile with parity Pin, the tile adds (S if Pin == 0 else T - S) to the running sum. These
  summaries combine associatively:
  (P1,S1,T1) then (P2,S2,T2) = (P1 ^ P2, S1 + (T2 - S2 if P1 else S2), T1 + T2).
* The tile computes its summary (a cumsum of the positive flags, then reductions), publishes
  it at once as an AGGREGATE in a 64-bit status word, then looks back over its predecessors'
  status words, a window of LOOKBACK words at a time (one vector load), until it meets an
  INCLUSIVE word (parity and running sum up to and including that tile). It then publishes its
  own INCLUSIVE word and writes y = Yin + cumsum(x where the global parity is odd).
* Status words carry an epoch (call number) in their high bits, so the status buffer and ticket
  counter are reused across calls with no clearing launch; they are cleared only on first use,
  on growth, and when the epoch or ticket counter would wrap.

Packing of the 64-bit status word (bits):
  [0, 20)  AGGREGATE: S + 2**19      | INCLUSIVE: running sum Y as uint32 in [0, 32)
  [20, 40) AGGREGATE: T + 2**19      |
  40       parity P (aggregate: the tile's; inclusive: through the end of the tile)
  41       1 = INCLUSIVE, 0 = AGGREGATE
  [42, 62) epoch (1 .. 2**20 - 1); 0 means "never written in this buffer"
The 20-bit fields hold |S|, |T| <= 10 * BLOCK (at most 163,840 for BLOCK <= 16384) < 2**19 for
the inputs this task draws (int32 values in [-10, 10)); inputs with |x| >= 2**19 / BLOCK (that
is 128 for a 4096-element tile) could overflow them. Running sums and outputs are int32, which is
exact as long as the true prefix sums fit in int32 (they do here: |y| <= 10 * 1e8).

Interpreter / CPU: under TRITON_INTERPRET=1 the interpreter runs programs one after another in
program-id order, and the ticket counter then hands out tickets in the same order, so every
look-back finds its predecessor's INCLUSIVE word already written and never spins. The same
single-pass kernel therefore runs unchanged on CPU tensors (used by the CPU smoke profile);
no multi-pass fallback is needed (checked locally at many lengths).
"""

import torch
import triton
import triton.language as tl

# ---- configuration (chosen by bench.py on an H200; see README.md) ----------------------------
# MODE: "single" = one-pass look-back kernel (default); "three" = reduce-then-scan, 3 launches.
MODE = 'three'
# single mode: elements per tile, warps per program, status words read per look-back step
BLOCK = 4096
NUM_WARPS = 4
LOOKBACK = 512
# single mode: 0 = one program per tile; > 0 = persistent kernel with this many programs per SM
PROGRAMS_PER_SM = 0
# three mode: elements per tile and warps (reduce and down-sweep), spine chunk and warps
BLOCK3 = 2048
WARPS3 = 4
SPINE_CHUNK = 4096
SPINE_WARPS = 8
# single mode: re-launch compiled kernels through their launcher directly (see _launch_single)
FAST_LAUNCH = True
# test / diagnostic knobs (leave as they are): see _tile_scan
_INC_EVERY = 1
_DIAG_NO_LOOKBACK = False

_EPOCH_LIMIT = 1 << 20
_TICKET_LIMIT = 1 << 30


@triton.jit
def _tile_scan(x, tile, status_ptr, epoch, LOOKBACK: tl.constexpr, INC_EVERY: tl.constexpr,
               DIAG_NO_LOOKBACK: tl.constexpr = False):
    """Scan one tile (x holds its BLOCK values, zeros past the end); returns its y values."""
    # INC_EVERY > 1 is a test knob only: tiles whose index is not a multiple of it leave their
    # AGGREGATE word in place instead of the INCLUSIVE one, so that look-back has to combine
    # aggregates across several windows (the interpreter otherwise never exercises that path).

    # ---- local summary --------------------------------------------------------------------
    pos = (x > 0).to(tl.int32)
    cpos = tl.cumsum(pos, axis=0)              # inclusive count of positives in the tile
    odd = (cpos - pos) & 1                     # parity of positives strictly before, in tile
    xs = tl.where(odd != 0, x, 0)
    P = tl.sum(pos, axis=0) & 1
    S = tl.sum(xs, axis=0)
    T = tl.sum(x, axis=0)

    ep = epoch.to(tl.int64) << 42
    status_tile = status_ptr + tile
    if DIAG_NO_LOOKBACK or tile == 0:  # DIAG_NO_LOOKBACK: timing diagnostic only, wrong y
        Pin = P * 0
        Yin = S * 0
    else:
        agg = (ep | (P.to(tl.int64) << 40)
               | ((T + (1 << 19)).to(tl.int64) << 20) | (S + (1 << 19)).to(tl.int64))
        tl.atomic_xchg(status_tile, agg)

        # ---- decoupled look-back, LOOKBACK status words at a time ------------------------
        # acc = combined summary of tiles [end, tile)  (parity, S, T)
        accP = P * 0
        accS = S * 0
        accT = S * 0
        end = tile
        done = tile < 0            # False, as an i1 scalar (loop-carried type must not change)
        Pin = P * 0
        Yin = S * 0
        k_rel = tl.arange(0, LOOKBACK)
        while not done:
            k = end - LOOKBACK + k_rel
            kin = k >= 0
            ready = tile < 0
            w = tl.zeros([LOOKBACK], dtype=tl.int64)
            last_inc = tile * 0 - 1
            while not ready:
                w = tl.load(status_ptr + k, mask=kin, other=0, volatile=True)
                valid = ((w >> 42) == epoch) & kin
                inc = valid & (((w >> 41) & 1) != 0)
                last_inc = tl.max(tl.where(inc, k, -1), axis=0)
                need = (k > last_inc) & kin
                missing = tl.sum((need & (valid == 0)).to(tl.int32), axis=0)
                ready = missing == 0
            # combine the aggregates after the last inclusive word, in order
            seg = (k > last_inc) & kin
            wp = tl.where(seg, ((w >> 40) & 1).to(tl.int32), 0)
            ws = tl.where(seg, ((w & 0xFFFFF) - (1 << 19)).to(tl.int32), 0)
            wt = tl.where(seg, (((w >> 20) & 0xFFFFF) - (1 << 19)).to(tl.int32), 0)
            epar = (tl.cumsum(wp, axis=0) - wp) & 1    # parity entering each tile of the segment
            segS = tl.sum(tl.where(epar != 0, wt - ws, ws), axis=0)
            segT = tl.sum(wt, axis=0)
            segP = tl.sum(wp, axis=0) & 1
            # acc = seg ++ acc
            accS = segS + tl.where(segP != 0, accT - accS, accS)
            accT = segT + accT
            accP = segP ^ accP
            if last_inc >= 0:
                winc = tl.sum(tl.where(k == last_inc, w, 0), axis=0)
                incP = ((winc >> 40) & 1).to(tl.int32)
                incY = ((winc << 32) >> 32).to(tl.int32)     # sign-extend the low 32 bits
                Pin = incP ^ accP
                Yin = incY + tl.where(incP != 0, accT - accS, accS)
                done = tile >= 0
            else:
                end = end - LOOKBACK

    # ---- publish inclusive prefix --------------------------------------------------------
    Pout = Pin ^ P
    Yout = Yin + tl.where(Pin != 0, T - S, S)
    low32 = tl.full([], 0xFFFFFFFF, tl.int64)
    inc_word = ep | (1 << 41) | (Pout.to(tl.int64) << 40) | (Yout.to(tl.int64) & low32)
    if INC_EVERY == 1:
        tl.atomic_xchg(status_tile, inc_word)
    else:
        if tile % INC_EVERY == 0:
            tl.atomic_xchg(status_tile, inc_word)

    # ---- output ---------------------------------------------------------------------------
    kept = tl.where((odd ^ Pin) != 0, x, 0)
    y = Yin + tl.cumsum(kept, axis=0)
    return y


# Scalars that change from call to call are not specialized on (Triton would otherwise compile
# a new variant the first time e.g. epoch % 16 == 0, possibly inside a timed call). n stays
# specialized: n % 16 == 0 lets the masked loads and stores be 16 bytes wide.
@triton.jit(do_not_specialize=["ticket_base", "epoch"])
def _scan_kernel(x_ptr, y_ptr, status_ptr, ticket_ptr, n, ticket_base, epoch,
                 BLOCK: tl.constexpr, LOOKBACK: tl.constexpr, INC_EVERY: tl.constexpr,
                 DIAG_NO_LOOKBACK: tl.constexpr = False):
    """One tile per program; the tile index is an atomic ticket."""
    tile = tl.atomic_add(ticket_ptr, 1) - ticket_base
    offs = tile.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    y = _tile_scan(x, tile, status_ptr, epoch, LOOKBACK, INC_EVERY, DIAG_NO_LOOKBACK)
    tl.store(y_ptr + offs, y, mask=mask)


@triton.jit(do_not_specialize=["tiles", "ticket_base", "epoch"])
def _scan_kernel_persistent(x_ptr, y_ptr, status_ptr, ticket_ptr, n, tiles, ticket_base, epoch,
                            BLOCK: tl.constexpr, LOOKBACK: tl.constexpr,
                            INC_EVERY: tl.constexpr):
    """A fixed number of programs, each taking tiles by ticket until they run out; the next
    tile's load is issued before the current tile is scanned (software prefetch). A program
    takes tickets in increasing order and only ever waits on smaller tickets, so the smallest
    unpublished tile always makes progress. Every program takes exactly one ticket >= tiles,
    so one launch consumes tiles + grid tickets."""
    ar = tl.arange(0, BLOCK)
    tile = tl.atomic_add(ticket_ptr, 1) - ticket_base
    offs = tile.to(tl.int64) * BLOCK + ar
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    while tile < tiles:
        nxt = tl.atomic_add(ticket_ptr, 1) - ticket_base
        noffs = nxt.to(tl.int64) * BLOCK + ar
        xn = tl.load(x_ptr + noffs, mask=noffs < n, other=0)
        y = _tile_scan(x, tile, status_ptr, epoch, LOOKBACK, INC_EVERY)
        tl.store(y_ptr + offs, y, mask=offs < n)
        tile = nxt
        offs = noffs
        x = xn


# ---- reduce-then-scan (three launches; reads x twice) ---------------------------------------
@triton.jit
def _tile_summary(x):
    pos = (x > 0).to(tl.int32)
    cpos = tl.cumsum(pos, axis=0)
    odd = (cpos - pos) & 1
    P = tl.sum(pos, axis=0) & 1
    S = tl.sum(tl.where(odd != 0, x, 0), axis=0)
    T = tl.sum(x, axis=0)
    return P, S, T, odd


@triton.jit
def _reduce_kernel(x_ptr, p_ptr, s_ptr, t_ptr, n, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    offs = tile.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    P, S, T, odd = _tile_summary(x)
    tl.store(p_ptr + tile, P)
    tl.store(s_ptr + tile, S)
    tl.store(t_ptr + tile, T)


@triton.jit
def _spine_kernel(p_ptr, s_ptr, t_ptr, tiles, CHUNK: tl.constexpr):
    """One program: exclusive scan of the tile summaries, in place: p <- parity entering the
    tile, s <- running sum entering the tile."""
    Pin = tl.program_id(0) * 0
    Yin = tl.program_id(0) * 0
    for start in range(0, tiles, CHUNK):
        k = start + tl.arange(0, CHUNK)
        m = k < tiles
        p = tl.load(p_ptr + k, mask=m, other=0)
        sv = tl.load(s_ptr + k, mask=m, other=0)
        tv = tl.load(t_ptr + k, mask=m, other=0)
        par = ((tl.cumsum(p, axis=0) - p) & 1) ^ Pin
        c = tl.where(par != 0, tv - sv, sv)
        cc = tl.cumsum(c, axis=0)
        tl.store(p_ptr + k, par, mask=m)
        tl.store(s_ptr + k, Yin + cc - c, mask=m)
        Pin = Pin ^ (tl.sum(p, axis=0) & 1)
        Yin = Yin + tl.sum(c, axis=0)


@triton.jit
def _downsweep_kernel(x_ptr, y_ptr, p_ptr, s_ptr, n, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    offs = tile.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    Pin = tl.load(p_ptr + tile)
    Yin = tl.load(s_ptr + tile)
    pos = (x > 0).to(tl.int32)
    odd = (tl.cumsum(pos, axis=0) - pos) & 1
    kept = tl.where((odd ^ Pin) != 0, x, 0)
    tl.store(y_ptr + offs, Yin + tl.cumsum(kept, axis=0), mask=mask)


def _three_pass(x, y, n):
    tiles = triton.cdiv(n, BLOCK3)
    summ = torch.empty((3, tiles), dtype=torch.int32, device=x.device)
    _reduce_kernel[(tiles,)](x, summ[0], summ[1], summ[2], n, BLOCK=BLOCK3, num_warps=WARPS3)
    _spine_kernel[(1,)](summ[0], summ[1], summ[2], tiles, CHUNK=SPINE_CHUNK, num_warps=SPINE_WARPS)
    _downsweep_kernel[(tiles,)](x, y, summ[0], summ[1], n, BLOCK=BLOCK3, num_warps=WARPS3)


_sm_counts = {}


def _sm_count(device):
    if device.type != "cuda":
        return 4
    key = device.index if device.index is not None else torch.cuda.current_device()
    c = _sm_counts.get(key)
    if c is None:
        c = torch.cuda.get_device_properties(key).multi_processor_count
        _sm_counts[key] = c
    return c


class _Scratch:
    __slots__ = ("status", "ticket", "epoch", "ticket_base")

    def __init__(self, device, capacity):
        self.status = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.ticket = torch.zeros(1, dtype=torch.int32, device=device)
        self.epoch = 0
        self.ticket_base = 0


_scratch = {}


def _get_scratch(device, tiles):
    key = (device.type, device.index)
    s = _scratch.get(key)
    if s is None or s.status.numel() < tiles:
        cap = max(tiles, 1024)
        if s is not None:
            cap = max(cap, 2 * s.status.numel())
        s = _Scratch(device, cap)
        _scratch[key] = s
    s.epoch += 1
    if s.epoch >= _EPOCH_LIMIT:
        s.status.zero_()
        s.epoch = 1
    if s.ticket_base + 2 * tiles + 4096 >= _TICKET_LIMIT:
        s.ticket.zero_()
        s.ticket_base = 0
    return s


# Lean re-launch of an already compiled _scan_kernel. Triton's generic launch path (argument
# binding, specialization key, cache look-up) costs host time, and the scorer's CUDA-event
# window includes host time before the kernel reaches the GPU. Once a variant has been compiled
# and launched the normal way, later calls with the same specialization (same device, same
# n % 16 == 0 / n == 1 / n < 2**31 and 16-byte alignment of x and y) call the compiled kernel's launcher
# directly, with the arguments Triton itself passes (all kernel arguments in order, constexprs
# included). Any TypeError from that launcher (a Triton whose launcher differs) switches the
# lean path off for good and falls back to the normal launch. Switch: FAST_LAUNCH above.
_fast_kernels = {}
_fast_ok = [True]


def _launch_single(x, y, s, n, base, tiles):
    args = (x, y, s.status, s.ticket, n, base, s.epoch, BLOCK, LOOKBACK, _INC_EVERY, _DIAG_NO_LOOKBACK)
    key = None
    if FAST_LAUNCH and _fast_ok[0] and x.is_cuda:
        key = (x.device.index, n % 16 == 0, n == 1, n < 2**31, x.data_ptr() % 16 == 0, y.data_ptr() % 16 == 0,
               BLOCK, LOOKBACK, NUM_WARPS, _INC_EVERY, _DIAG_NO_LOOKBACK)
        entry = _fast_kernels.get(key)
        if entry is not None:
            k, stream_of = entry
            try:
                k.run(tiles, 1, 1, stream_of(x.device.index), k.function, k.packed_metadata, None,
                      None, None, *args)
                return
            except TypeError:
                _fast_ok[0] = False
    k = _scan_kernel[(tiles,)](*args, num_warps=NUM_WARPS)
    if key is not None:
        try:
            stream_of = triton.runtime.driver.active.get_current_stream
            if k is not None and callable(getattr(k, "run", None)) and hasattr(k, "function") \
                    and hasattr(k, "packed_metadata"):
                _fast_kernels[key] = (k, stream_of)
        except Exception:  # noqa: BLE001 - no lean path on this Triton
            _fast_ok[0] = False


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    """Conditional prefix sum of a 1-D int32 tensor.

    ``y[i] = sum of x[j] for j <= i such that the number of positive values in x[0:j]
    (strictly before j) is odd``. Returns an int32 tensor of the same length, on x's device.
    """
    if x.dtype != torch.int32:
        x = x.to(torch.int32)
    x = x.contiguous()
    n = x.numel()
    y = torch.empty_like(x)
    if n == 0:
        return y
    if MODE == "three":
        _three_pass(x, y, n)
        return y
    tiles = triton.cdiv(n, BLOCK)
    s = _get_scratch(x.device, tiles)
    base = s.ticket_base
    if PROGRAMS_PER_SM > 0:
        grid = min(tiles, PROGRAMS_PER_SM * _sm_count(x.device))
        s.ticket_base = base + tiles + grid
        _scan_kernel_persistent[(grid,)](x, y, s.status, s.ticket, n, tiles, base, s.epoch,
                                         BLOCK=BLOCK, LOOKBACK=LOOKBACK, INC_EVERY=_INC_EVERY,
                                         num_warps=NUM_WARPS)
    else:
        s.ticket_base = base + tiles
        _launch_single(x, y, s, n, base, tiles)
    return y
