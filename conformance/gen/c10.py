import json, hashlib, subprocess
def cid(b):
    return subprocess.run(["./cordon","canon","id","--form","raw","-"],input=b,capture_output=True,check=True).stdout.decode().strip()
def jcs(o):  # ASCII-only objects of strings, ints, lists, dicts
    return json.dumps(o, sort_keys=True, separators=(",",":"), ensure_ascii=True)
TASK = cid(b"fleet task: fix the failing test")
def receipt(i, salt=""): return cid(("receipt of item %d%s" % (i, salt)).encode())
def leafdoc(i, name, r): return {"index": i, "item": name, "receipt": r, "type": "cordon.fleet-leaf.v1"}
def H(b): return hashlib.sha256(b).digest()
def mth(d):
    if len(d)==0: return H(b"")
    if len(d)==1: return H(b"\x00"+d[0])
    k=1
    while k*2 < len(d): k*=2
    return H(b"\x01"+mth(d[:k])+mth(d[k:]))
def path(m, d):
    if len(d)<=1: return []
    k=1
    while k*2 < len(d): k*=2
    if m<k: return path(m,d[:k])+[mth(d[k:])]
    return path(m-k,d[k:])+[mth(d[:k])]
def items(n, change=None):
    its=[]
    for i in range(n):
        its.append(["item-%02d"%i, receipt(i, "x" if i==change else "")])
    return its
def record(its):
    data=[jcs(leafdoc(i,n,r)).encode() for i,(n,r) in enumerate(its)]
    return {"root": mth(data).hex(), "size": len(its), "task": TASK, "type": "cordon.fleet.v1"}, data
def proof(its, m):
    rec, data = record(its)
    n,r = its[m]
    return {"hashes":[h.hex() for h in path(m,data)], "leaf": leafdoc(m,n,r), "size": len(its), "type":"cordon.fleet-proof.v1"}
vs=[]; c=[0]
def add(name, desc, op, inp, out=None, err=None, with_id=True):
    c[0]+=1
    v={"id":"C10-%03d-%s"%(c[0],name),"class":"C10","description":desc,"op":op,"input":inp if isinstance(inp,str) else jcs(inp)}
    if err: v["expect"]={"error":err}
    else:
        v["expect"]={"output":out}
        if with_id: v["expect"]["id"]=cid(out.encode())
    vs.append(v)
for n in [1,2,3,4,5,7,8]:
    rec,_=record(items(n))
    add("record-%d"%n, "The record of a fleet of %d item%s: its RFC 6962 root, computed independently."%(n,"" if n==1 else "s"), "fleet-record", {"task":TASK,"items":items(n)}, jcs(rec))
rec,_=record(items(4,change=2))
add("record-4-changed-leaf","Changing one item's receipt changes the root (compare C10-004).","fleet-record",{"task":TASK,"items":items(4,change=2)},jcs(rec))
add("record-empty","A fleet has at least one item.","fleet-record",{"task":TASK,"items":[]},err="fleet-invalid")
add("record-duplicate-item","An item appears once.","fleet-record",{"task":TASK,"items":[["a",receipt(0)],["a",receipt(1)]]},err="fleet-invalid")
add("record-control-name","An item name with a control character is refused.","fleet-record",{"task":TASK,"items":[["a\nb",receipt(0)]]},err="fleet-invalid")
add("record-bad-receipt","A receipt must be a ContentId.","fleet-record",{"task":TASK,"items":[["a","b3:short"]]},err="fleet-invalid")
for n,m in [(1,0),(5,0),(5,4),(7,6),(8,3)]:
    add("prove-%d-of-%d"%(m,n),"The inclusion proof of item %d in a fleet of %d: the RFC 6962 audit path, computed independently."%(m,n),"fleet-prove",{"task":TASK,"items":items(n),"index":m},jcs(proof(items(n),m)))
add("prove-out-of-range","No proof for an index past the end.","fleet-prove",{"task":TASK,"items":items(3),"index":3},err="fleet-invalid")
r7,_=record(items(7)); p76=proof(items(7),6); p73=proof(items(7),3)
add("verify-last-of-7","The last item of an odd fleet proves its membership.","fleet-verify",{"record":r7,"proof":p76},"included",with_id=False)
r1,_=record(items(1))
add("verify-single","A fleet of one proves with an empty path.","fleet-verify",{"record":r1,"proof":proof(items(1),0)},"included",with_id=False)
r8,_=record(items(8))
add("verify-3-of-8","An item of an even fleet proves its membership.","fleet-verify",{"record":r8,"proof":proof(items(8),3)},"included",with_id=False)
f=json.loads(jcs(p73)); f["leaf"]["item"]="stranger"
add("verify-foreign-item","A foreign item on a real proof path fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
f=json.loads(jcs(p73)); f["leaf"]["receipt"]=receipt(99)
add("verify-foreign-receipt","A member's name with another receipt fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
f=json.loads(jcs(p73)); f["leaf"]["index"]=2
add("verify-wrong-index","The right leaf at another index fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
f=json.loads(jcs(p73)); f["size"]=8
add("verify-wrong-size","A proof for another size fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
f=json.loads(jcs(p73)); f["hashes"]=f["hashes"][:-1]
add("verify-dropped-hash","A truncated path fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
f=json.loads(jcs(p73)); f["hashes"]=f["hashes"]+[f["hashes"][0]]
add("verify-extra-hash","A path with an extra hash fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
f=json.loads(jcs(p73)); f["hashes"][0],f["hashes"][1]=f["hashes"][1],f["hashes"][0]
add("verify-swapped-hashes","A path in another order fails.","fleet-verify",{"record":r7,"proof":f},err="not-included")
r=dict(r7); r["root"]=("0" if r7["root"][0]!="0" else "1")+r7["root"][1:]
add("verify-other-root","A proof does not verify against another root.","fleet-verify",{"record":r,"proof":p73},err="not-included")
add("verify-other-fleet","A proof from another fleet of the same size fails.","fleet-verify",{"record":r7,"proof":proof(items(7,change=3),3)},err="not-included")
f=json.loads(jcs(p73)); f["leaf"]["index"]=7
add("verify-index-past-size","A leaf index at or past the size is malformed.","fleet-verify",{"record":r7,"proof":f},err="fleet-invalid")
f=json.loads(jcs(p73)); f["hashes"][0]=f["hashes"][0].upper()
add("verify-uppercase-hash","Hashes are lower-case hex: one spelling each.","fleet-verify",{"record":r7,"proof":f},err="fleet-invalid")
f=json.loads(jcs(p73)); f["leaf"]["extra"]=True
add("verify-extra-member","An unknown member is refused.","fleet-verify",{"record":r7,"proof":f},err="fleet-invalid")
doc={"format":"cordon-conformance-v1","class":"C10","title":"fleet records","vectors":vs}
open("conformance/v1/C10.json","w").write(json.dumps(doc,indent=2)+"\n")
print(len(vs))
