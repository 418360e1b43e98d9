# Generates conformance/v1/standing.json (class C20). Documents are written
# here from docs/SPEC.md §3.6; envelopes are signed with Python's
# cryptography (Ed25519) over DSSE's PAE, independently of cordon.
# ContentIds come from `./cordon canon id --form raw` (the C1 core).
import json, subprocess, base64
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization
def cid(b):
    if isinstance(b,str): b=b.encode()
    return subprocess.run(["./cordon","canon","id","--form","raw","-"],input=b,capture_output=True,check=True).stdout.decode().strip()
def jcs(o): return json.dumps(o, sort_keys=True, separators=(",",":"), ensure_ascii=True)
def key(seed):
    k = Ed25519PrivateKey.from_private_bytes(seed)
    pub = k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return k, cid(pub)
TEST = bytes(range(32)); OTHER = bytes(range(32, 64)); HOLD = bytes(range(64, 96))
tk, tid = key(TEST); ok_, oid = key(OTHER); hk, hid = key(HOLD)
def seal(k, ptype, payload):
    pae = b"DSSEv1 %d %s %d %s" % (len(ptype), ptype.encode(), len(payload), payload.encode())
    sig = k.sign(pae)
    return {"payload": base64.b64encode(payload.encode()).decode(), "payloadType": ptype,
            "signatures": [{"keyid": key_id_of(k), "sig": base64.b64encode(sig).decode()}]}
ids = {}
def key_id_of(k):
    pub = k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return cid(pub)
G = lambda allow, wall: {"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":False,"exec":{"allow":[{"name":n} for n in allow]},"limits":{"wall_ms":wall}}
PARENT, BOUNDS, NARROW, WIDE = G(["make","python3"],600000), G(["make"],60000), G(["make"],30000), G(["make","python3"],60000)
def policy(issuer=tid, holder=hid, **kw):
    p = {"type":"cordon.mint-policy.v1","issuer":issuer,"holder":holder,"parent":PARENT,"bounds":BOUNDS,
         "max_children":5,"rate":{"count":2,"window_ms":60000},
         "triggers":[{"type":"git.push","match":{"branch":"main"}}],"not_before_ms":1000000,"not_after_ms":2000000}
    p.update(kw); return p
def event(eid="push-1", kind="git.push", branch="main"):
    return {"type":"cordon.event.v1","kind":kind,"id":eid,"at_ms":1500000,"fields":{"branch":branch,"repo":"acme/app"}}
vs=[]; n=[0]
def add(name, desc, op, inp, out=None, err=None, with_id=True):
    n[0]+=1
    v={"id":"C20-%03d-%s"%(n[0],name),"class":"C20","description":desc,"op":op,"input":jcs(inp)}
    if err: v["expect"]={"error":err}
    else:
        v["expect"]={"output":out}
        if with_id: v["expect"]["id"]=cid(out)
    vs.append(v)
def minted(p, e, child, now, seq):
    return jcs({"type":"cordon.minted.v1","policy":cid(jcs(p)),"event":cid(jcs(e)),"seq":seq,"at_ms":now,"grants":child})
P=policy(); E=event()
add("mint-bounds","A matching event mints the bounds as the child, numbered by the count so far.","mint",{"policy":P,"event":E,"child":None,"now_ms":1500000,"total":0,"in_window":0},minted(P,E,BOUNDS,1500000,0))
add("mint-narrower","A child narrower than the bounds (a shorter wall clock) is minted through the attenuation path.","mint",{"policy":P,"event":E,"child":NARROW,"now_ms":1500000,"total":3,"in_window":1},minted(P,E,NARROW,1500000,3))
add("mint-widening","A child wider than the bounds is refused.","mint",{"policy":P,"event":E,"child":WIDE,"now_ms":1500000,"total":0,"in_window":0},err="widening")
add("mint-unmatched-field","An event whose field differs from the trigger's condition mints nothing.","mint",{"policy":P,"event":event(branch="dev"),"child":None,"now_ms":1500000,"total":0,"in_window":0},err="mint-unmatched")
add("mint-unmatched-kind","An event of another kind mints nothing.","mint",{"policy":P,"event":event(kind="git.tag"),"child":None,"now_ms":1500000,"total":0,"in_window":0},err="mint-unmatched")
add("mint-over-rate","A mint past the rate in the window is refused.","mint",{"policy":P,"event":E,"child":None,"now_ms":1500000,"total":2,"in_window":2},err="mint-rate")
add("mint-exhausted","A mint past the total is refused, whatever the window.","mint",{"policy":P,"event":E,"child":None,"now_ms":1500000,"total":5,"in_window":0},err="mint-exhausted")
add("mint-expired","A mint at or after not_after is refused.","mint",{"policy":P,"event":E,"child":None,"now_ms":2000000,"total":0,"in_window":0},err="mint-expired")
add("mint-not-yet-valid","A mint before not_before is refused.","mint",{"policy":P,"event":E,"child":None,"now_ms":999999,"total":0,"in_window":0},err="mint-expired")
add("policy-bounds-wider-than-parent","A policy whose bounds exceed the held grant set is invalid.","mint",{"policy":policy(parent=BOUNDS,bounds=PARENT),"event":E,"child":None,"now_ms":1500000,"total":0,"in_window":0},err="mint-invalid")
add("policy-holder-is-issuer","A policy whose holder is its issuer is invalid.","mint",{"policy":policy(holder=tid),"event":E,"child":None,"now_ms":1500000,"total":0,"in_window":0},err="mint-invalid")
add("policy-rate-over-total","A rate above the total is invalid.","mint",{"policy":policy(rate={"count":6,"window_ms":1000}),"event":E,"child":None,"now_ms":1500000,"total":0,"in_window":0},err="mint-invalid")
add("policy-unknown-member","An unknown policy member is refused.","mint",{"policy":policy(extra=True),"event":E,"child":None,"now_ms":1500000,"total":0,"in_window":0},err="mint-invalid")
add("policy-open","A policy signed by the issuer it names opens; its address is returned.","policy-open",{"seed":TEST.hex(),"envelope":seal(tk,"application/vnd.cordon.mint-policy.v1+json",jcs(P))},cid(jcs(P)),with_id=False)
add("policy-wrong-signer","A policy naming the test key but signed by another key does not verify under the test key.","policy-open",{"seed":TEST.hex(),"envelope":seal(ok_,"application/vnd.cordon.mint-policy.v1+json",jcs(P))},err="bad-signature")
add("policy-not-its-issuer","A policy signed, and verified, by a key it does not name as issuer is refused.","policy-open",{"seed":OTHER.hex(),"envelope":seal(ok_,"application/vnd.cordon.mint-policy.v1+json",jcs(P))},err="mint-signer")
add("policy-other-payload-type","A policy signed as another payload type does not open.","policy-open",{"seed":TEST.hex(),"envelope":seal(tk,"application/vnd.cordon.grants.v1+json",jcs(P))},err="bad-signature")
doc={"format":"cordon-conformance-v1","class":"C20","title":"standing grants","vectors":vs}
open("conformance/v1/standing.json","w").write(json.dumps(doc,indent=2)+"\n")
print(len(vs))
