# A vLLM-style consumer (pyzmq = libzmq, Python msgpack, cbor2) of a kvpage publisher:
# framing, replay over a DEALER (libzmq's REQ keeps only the first of the replies), and every stored block's
# hash recomputed from the event's tokens and extra keys exactly as vLLM computes it.
import zmq, msgpack, cbor2, hashlib, sys
def sha256_cbor(x): return hashlib.sha256(cbor2.dumps(x, canonical=True)).digest()
NONE = sha256_cbor("42")
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB); sub.connect("tcp://127.0.0.1:15557"); sub.setsockopt_string(zmq.SUBSCRIBE, "kv@")
replay = ctx.socket(zmq.DEALER); replay.connect("tcp://127.0.0.1:15558")
poller = zmq.Poller(); poller.register(replay, zmq.POLLIN)
last_seq = -1; batches = 0; checked = 0; replayed = 0; removed = 0; kinds = set()
def check(payload):
    global checked, removed
    b = msgpack.unpackb(payload, raw=False)
    assert isinstance(b, list) and len(b) == 3 and isinstance(b[0], float) and b[2] == 0, b[:1]
    for ev in b[1]:
        kinds.add(ev[0])
        if ev[0] == "BlockStored":
            assert len(ev) == 9, len(ev)
            hashes, parent, toks, bs, lora_id, medium, lora_name, extra = ev[1:]
            assert medium == "GPU" and bs == 16 and len(toks) == 16 * len(hashes) and len(extra) == len(hashes)
            p = parent if parent is not None else NONE
            for i, h in enumerate(hashes):
                ek = tuple(extra[i]) if extra[i] is not None else None
                want = sha256_cbor((p, tuple(toks[i*16:(i+1)*16]), ek))
                assert want == h, (i, want.hex(), h.hex())
                p = h; checked += 1
        elif ev[0] == "BlockRemoved":
            removed += len(ev[1])
deadline = 60
import time; t0 = time.time()
while time.time() - t0 < 8:
    if not sub.poll(200): continue
    topic, seq_bytes, payload = sub.recv_multipart()
    assert topic == b"kv@pod@model"
    seq = int.from_bytes(seq_bytes, "big")
    if seq > last_seq + 1:   # vLLM's example; here also at start, to fetch what came before
        replay.send_multipart([b"", (last_seq + 1).to_bytes(8, "big")])
        while poller.poll(timeout=500):
            _, seq_bytes, rp = replay.recv_multipart()
            if not rp: break
            rs = int.from_bytes(seq_bytes, "big")
            if rs > last_seq:
                check(rp); last_seq = rs; replayed += 1; batches += 1
    if seq > last_seq:
        check(payload); last_seq = seq; batches += 1
print(f"batches {batches} (replayed {replayed}), blocks whose hash Python recomputed: {checked}, removed {removed}, kinds {sorted(kinds)}, last seq {last_seq}")
