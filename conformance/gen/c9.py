# C9 vectors: warm pools' idle-energy books (docs/SPEC.md §11), computed by
# an independent model of the books below. Run from the repository root
# with ./cordon built: python3 conformance/gen/c9.py
import json, subprocess
def cid(b):
    return subprocess.run(["./cordon","canon","id","--form","raw","-"],input=b,capture_output=True,check=True).stdout.decode().strip()
def jcs(o):  # ASCII-only objects of strings, ints, lists, dicts
    return json.dumps(o, sort_keys=True, separators=(",",":"), ensure_ascii=True)
ENV = cid(b"environment: host runtime")
ENV2 = cid(b"environment: another image")
POL = cid(b"policy: grants, tier, tenant, limits")
POL2 = cid(b"policy: the same grants with other limits")

class Refused(Exception):
    pass

def books(events):
    """The books as SPEC §11 defines them; returns the output document or raises Refused(kind)."""
    parked, done = {}, set()
    total = claimed = overhead = 0
    claims = evicted = 0
    charges = []
    members = {"park": {"op", "slot", "env", "policy"}, "accrue": {"op", "slot", "uj"},
               "claim": {"op", "slot", "env", "policy"}, "evict": {"op", "slot"}}
    for e in events:
        op, s = e["op"], e["slot"]
        if op in members and set(e) != members[op]: raise Refused("pool-invalid")
        if op == "park":
            if s == "" or s in parked or s in done: raise Refused("pool-invalid")
            parked[s] = [e["env"], e["policy"], 0]
        elif op == "accrue":
            if e["uj"] <= 0: raise Refused("pool-invalid")
            if s not in parked: raise Refused("pool-gone")
            parked[s][2] += e["uj"]; total += e["uj"]
        elif op in ("claim", "evict"):
            if s not in parked: raise Refused("pool-gone")
            env, pol, idle = parked[s]
            if op == "claim" and (e["env"] != env or e["policy"] != pol): raise Refused("pool-mismatch")
            if idle == 0: raise Refused("pool-zero-idle")
            del parked[s]; done.add(s)
            if op == "claim": claimed += idle; claims += 1
            else: overhead += idle; evicted += 1
            charges.append({"op": op, "slot": s, "idle_uj": idle})
        else:
            raise Refused("pool-invalid")
    pending = sum(p[2] for p in parked.values())
    assert total == claimed + overhead + pending
    return {"charges": charges, "total_uj": total, "claimed_uj": claimed, "overhead_uj": overhead,
            "pending_uj": pending, "parked": len(parked), "claims": claims, "evicted": evicted}

def park(s, env=ENV, pol=POL): return {"op": "park", "slot": s, "env": env, "policy": pol}
def accrue(s, uj): return {"op": "accrue", "slot": s, "uj": uj}
def claim(s, env=ENV, pol=POL): return {"op": "claim", "slot": s, "env": env, "policy": pol}
def evict(s): return {"op": "evict", "slot": s}

vs = []; c = [0]
def add(name, desc, events, err=None, raw=None):
    c[0] += 1
    inp = raw if raw is not None else jcs({"events": events})
    v = {"id": "C9-%03d-%s" % (c[0], name), "class": "C9", "description": desc, "op": "pool-books", "input": inp}
    if err:
        try:
            books(events); raise SystemExit("vector %s: the model accepts what should be refused" % name)
        except Refused as r:
            if raw is None and r.args[0] != err: raise SystemExit("vector %s: model says %s, want %s" % (name, r.args[0], err))
        v["expect"] = {"error": err}
    else:
        out = jcs(books(events))
        v["expect"] = {"output": out, "id": cid(out.encode())}
    vs.append(v)

add("claim-one", "A parked slot's idle energy is charged to the claim that takes it.",
    [park("1"), accrue("1", 2000), accrue("1", 500), claim("1")])
add("evict-one", "An evicted slot's idle energy is the pool's overhead.",
    [park("1"), accrue("1", 1234), evict("1")])
add("pending", "Idle energy of slots still parked is pending; total = claimed + overhead + pending.",
    [park("1"), park("2"), park("3"), accrue("1", 10), accrue("2", 20), accrue("3", 30), claim("2"), evict("3")])
add("mixed", "Claims and evictions interleaved with accrual, several slots.",
    [park("a"), accrue("a", 7), park("b"), accrue("b", 11), accrue("a", 5), claim("a"), park("c"),
     accrue("c", 1), accrue("b", 2), evict("b"), accrue("c", 999), claim("c")])
add("matching-key", "A claim whose environment address and policy are the slot's is accepted (compare the two mismatch vectors).",
    [park("1"), accrue("1", 40), claim("1")])
add("mismatch-env", "A claim for another environment address is refused.",
    [park("1"), accrue("1", 40), claim("1", env=ENV2)], err="pool-mismatch")
add("mismatch-policy", "A claim for another policy (grants, tier, tenant, limits) is refused.",
    [park("1"), accrue("1", 40), claim("1", pol=POL2)], err="pool-mismatch")
add("reuse-claimed", "A claimed slot is never claimed again: one slot, one run.",
    [park("1"), accrue("1", 40), claim("1"), claim("1")], err="pool-gone")
add("reuse-evicted", "An evicted slot cannot be claimed.",
    [park("1"), accrue("1", 40), evict("1"), claim("1")], err="pool-gone")
add("evict-twice", "A slot is evicted once.",
    [park("1"), accrue("1", 40), evict("1"), evict("1")], err="pool-gone")
add("accrue-after-claim", "A claimed slot accrues nothing more.",
    [park("1"), accrue("1", 40), claim("1"), accrue("1", 5)], err="pool-gone")
add("evict-zero", "An evicted slot's overhead is never zero.",
    [park("1"), evict("1")], err="pool-zero-idle")
add("claim-zero", "A claim is never charged zero: a fast start has a visible joule price.",
    [park("1"), claim("1")], err="pool-zero-idle")
add("park-twice", "A slot id is parked once, even after it left.",
    [park("1"), accrue("1", 1), claim("1"), park("1")], err="pool-invalid")
add("unknown-slot", "A claim of a slot never parked is refused.",
    [claim("9")], err="pool-gone")
add("accrue-zero", "Accrual is a positive figure.",
    [park("1"), accrue("1", 0)], err="pool-invalid")
add("unknown-op", "An unknown operation is malformed.",
    [park("1"), {"op": "reuse", "slot": "1"}], err="pool-invalid")
add("extra-member", "An unknown member is malformed.",
    [dict(park("1"), extra=True)], err="pool-invalid")

# Idle energy as the reference pool estimates it: 2 W per allotted core
# (ceil(CPUMillis/1000), at least one; the core count is not in these vectors),
# rounded up to a whole µJ, so 1 ns parked is 1 µJ (never zero).
add("estimator-rounding", "The reference estimator's smallest charge: 1 ns parked at 2 W rounds up to 1 µJ.",
    [park("1"), accrue("1", 1), evict("1")])

doc = {"format": "cordon-conformance-v1", "class": "C9", "title": "warm pools", "vectors": vs}
open("conformance/v1/C9.json", "w").write(json.dumps(doc, indent=2) + "\n")
print(len(vs))
