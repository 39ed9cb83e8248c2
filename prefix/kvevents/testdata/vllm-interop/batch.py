# A batch laid out as msgspec writes vLLM's array_like KVEventBatch, built with Python's
# msgpack (floats as float64, ints and strings in their shortest forms, bytes as bin).
import msgpack
h = {n: bytes.fromhex(x) for n, x in [
 ("plain0","63876f948a5f9ef88191c7d6554fbeeea5c622d4da15d0d527bd352623590b0d"),
 ("plain1","78a71559304e96e785d46658e382ff9b8b5f10f918102e3ac1b4060a29bae320"),
 ("extra0","d35d8c02db2bde5866b7c72ad60de6332413b21b0e7f22e165e676d80ab39a9e"),
 ("extra1","ae8bb6a2a705b7324779b50da32df5ca50d402c261599039feaeb5cd19e91eed")]}
def i64(b): return int.from_bytes(b, "big") & ((1<<64)-1)
def batch(hf):
    return [1700000000.5, [
      ["BlockStored", [hf(h["plain0"]), hf(h["plain1"])], None, list(range(32)), 16, None, "GPU", None, [None, None]],
      ["BlockStored", [hf(h["extra0"]), hf(h["extra1"])], None, [0,23,24,255,256,65535,65536,127999], 4, 7, "GPU", "my-lora",
         [["my-lora","img-a","tenant-a"], ["my-lora","img-a"]]],
      ["BlockRemoved", [hf(h["plain1"])], "GPU"],
      ["AllBlocksCleared"],
    ], 0]
print(msgpack.packb(batch(lambda b: b), use_bin_type=True).hex())
print(msgpack.packb(batch(i64), use_bin_type=True).hex())
