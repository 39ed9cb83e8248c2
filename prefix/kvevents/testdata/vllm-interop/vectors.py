# Reference vectors computed the way vLLM does (cbor2.dumps(canonical=True) + hashlib.sha256).
import cbor2, hashlib
def sha256_cbor(x): return hashlib.sha256(cbor2.dumps(x, canonical=True)).digest()
def i64(h): return int.from_bytes(h, "big") & ((1 << 64) - 1)
for seed in ["42", "", "0"]:
    r = sha256_cbor(seed)
    print("root", repr(seed), r.hex(), i64(r))
NONE = sha256_cbor("42")
toks = list(range(32))
p = NONE
for i in range(2):
    enc = cbor2.dumps((p, tuple(toks[i*16:(i+1)*16]), None), canonical=True)
    p = sha256_cbor((p, tuple(toks[i*16:(i+1)*16]), None))
    print("plain", i, enc.hex(), p.hex(), i64(p))
toks = [0, 23, 24, 255, 256, 65535, 65536, 127999]
extras = [("my-lora", "img-a", "tenant-a"), ("my-lora", "img-a")]
p = NONE
for i in range(2):
    x = (p, tuple(toks[i*4:(i+1)*4]), extras[i])
    p = sha256_cbor(x)
    print("extra", i, cbor2.dumps(x, canonical=True).hex(), p.hex(), i64(p))
