# Generates conformance/v1/amend.json (class C21). Documents are written
# here from docs/SPEC.md §3.7; envelopes and signatures are made with
# Python's cryptography (Ed25519) over DSSE's PAE, independently of
# cordon. ContentIds come from `./cordon canon id --form raw` (the C1
# core). Run from the repository root with a built ./cordon.
import json, subprocess, base64
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization
def cid(b):
    if isinstance(b,str): b=b.encode()
    return subprocess.run(["./cordon","canon","id","--form","raw","-"],input=b,capture_output=True,check=True).stdout.decode().strip()
def jcs(o): return json.dumps(o, sort_keys=True, separators=(",",":"), ensure_ascii=True)
def pub(k): return k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
ISSUER = bytes(range(32)); OTHER = bytes(range(32, 64)); AGENT = bytes(range(96, 128))
ik, ok_, ak = (Ed25519PrivateKey.from_private_bytes(s) for s in (ISSUER, OTHER, AGENT))
iid, aid = cid(pub(ik)), cid(pub(ak))
AP, CP = "application/vnd.cordon.amendment.v1+json", "application/vnd.cordon.checkpoint.v1+json"
def pae(ptype, payload): return b"DSSEv1 %d %s %d %s" % (len(ptype), ptype.encode(), len(payload), payload)
def seal(k, ptype, payload):
    payload = payload.encode()
    return {"payload": base64.b64encode(payload).decode(), "payloadType": ptype,
            "signatures": [{"keyid": cid(pub(k)), "sig": base64.b64encode(k.sign(pae(ptype, payload))).decode()}]}
def G(allow, hosts, wall=60000):
    g = {"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":False,
         "exec":{"allow":[{"name":n} for n in allow]},"limits":{"wall_ms":wall}}
    if hosts: g["egress"] = [{"host":h,"proto":"tcp","ports":[443,443]} for h in hosts]
    return g
FULL = G(["curl","make"], ["a.example","b.example"])
TIGHT = G(["curl"], ["a.example"])
WIDE = G(["curl","make"], ["a.example","b.example","evil.example"])
RUN, OTHERRUN = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
BUDGETS = {"max_turns":10,"max_model_calls":20,"max_input_tokens":1000,"max_output_tokens":1000,"wall_ms":60000}
STATE = {"run":RUN,"grants":FULL,"budgets":BUDGETS,"seq":0}
def amendment(grants=TIGHT, base=None, seq=1, run=RUN, issuer=None, budgets=None, **kw):
    a = {"type":"cordon.amendment.v1","run":run,"issuer":issuer or iid,"seq":seq,"base":base or cid(jcs(FULL)),"grants":grants}
    if budgets is not None: a["budgets"] = budgets
    a.update(kw); return a
def authority(grants, budgets): return {"type":"cordon.authority.v1","grants":grants,"budgets":budgets}
vs=[]; n=[0]
def add(name, desc, op, inp, out=None, err=None):
    n[0]+=1
    v={"id":"C21-%03d-%s"%(n[0],name),"class":"C21","description":desc,"op":op,"input":jcs(inp)}
    if err: v["expect"]={"error":err}
    else: v["expect"]={"output":out,"id":cid(out)}
    vs.append(v)
def apply_in(env, state=STATE, agent=AGENT, issuer=ISSUER):
    return {"state":state,"agent":agent.hex(),"issuer":issuer.hex(),"envelope":env}
def accepted(a, state=STATE, budgets=BUDGETS):
    before = cid(jcs(authority(state["grants"], state["budgets"])))
    after_auth = authority(a["grants"], budgets)
    return jcs({"before":before,"after":cid(jcs(after_auth)),"amendment":cid(jcs(a)),"authority":after_auth})
A = amendment()
add("amend-remove-host-and-command","The issuer removes an egress host and a command: accepted; the authority before and after differ.","amend-apply",apply_in(seal(ik,AP,jcs(A))),accepted(A))
B = amendment(grants=FULL, budgets={"max_turns":3})
add("amend-lower-budget","A budget-only amendment lowers max_turns: accepted; the grant set stays, the authority changes.","amend-apply",apply_in(seal(ik,AP,jcs(B))),accepted(B, budgets=dict(BUDGETS, max_turns=3)))
S2 = {"run":RUN,"grants":TIGHT,"budgets":BUDGETS,"seq":1}
C = amendment(grants=G(["curl"], []), base=cid(jcs(TIGHT)), seq=2)
add("amend-second","A second amendment, based on the first's grant set, removes the last host.","amend-apply",apply_in(seal(ik,AP,jcs(C)),state=S2),accepted(C, state=S2))
add("amend-widening","An amendment that adds an egress host widens the grant set in force: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(grants=WIDE)))),err="widening")
add("amend-agent-signed","An amendment signed by the run's own agent key: refused.","amend-apply",apply_in(seal(ak,AP,jcs(A))),err="amend-signer")
add("amend-other-key","An amendment signed by a key that is not the run's issuer: refused.","amend-apply",apply_in(seal(ok_,AP,jcs(A))),err="amend-signer")
add("amend-names-other-issuer","An amendment signed by the issuer but naming another issuer: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(issuer=cid(pub(ok_)))))),err="amend-signer")
add("amend-checkpoint-context","An amendment signed by the issuer in the checkpoint context does not open as an amendment.","amend-apply",apply_in(seal(ik,CP,jcs(A))),err="amend-signer")
add("amend-noop","An amendment whose grant set and budgets are those in force changes nothing: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(grants=FULL)))),err="amend-noop")
add("amend-base-mismatch","An amendment based on another grant set than the one in force: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(base=cid(jcs(TIGHT)))))),err="amend-base")
add("amend-raised-budget","An amendment that raises a budget: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(budgets={"max_turns":11})))),err="amend-budget")
add("amend-replay","The first amendment again, after it was applied (seq 1 in force): refused.","amend-apply",apply_in(seal(ik,AP,jcs(A)),state=dict(S2)),err="amend-replay")
add("amend-other-run","An amendment for another run: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(run=OTHERRUN)))),err="amend-run")
add("amend-unknown-member","An amendment with an unknown member: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(extra=1)))),err="amend-invalid")
add("amend-unknown-budget","An amendment naming a budget that is not one of the five: refused.","amend-apply",apply_in(seal(ik,AP,jcs(amendment(budgets={"max_loops":1})))),err="amend-invalid")
CK = {"type":"cordon.checkpoint.v1","run":RUN,"agent":aid,"turn":2,"journal":{"count":7,"head":cid("head")},"grants":cid(jcs(FULL)),
      "budgets":BUDGETS,"spent":{"max_turns":2,"max_model_calls":2,"max_input_tokens":100,"max_output_tokens":50,"wall_ms":1234},"seq":0}
add("checkpoint-open","A checkpoint signed by the agent it names opens; its exact bytes are returned.","checkpoint-open",{"agent":AGENT.hex(),"envelope":seal(ak,CP,jcs(CK))},jcs(CK))
tampered = seal(ak,CP,jcs(CK)); tampered["payload"] = base64.b64encode(jcs(dict(CK, turn=3)).encode()).decode()
add("checkpoint-tampered","A checkpoint whose payload was changed after signing does not verify.","checkpoint-open",{"agent":AGENT.hex(),"envelope":tampered},err="bad-signature")
add("checkpoint-other-key","A checkpoint signed by another key does not verify under the agent's.","checkpoint-open",{"agent":AGENT.hex(),"envelope":seal(ok_,CP,jcs(CK))},err="bad-signature")
add("checkpoint-names-other-agent","A checkpoint verified under a key it does not name as its agent: refused.","checkpoint-open",{"agent":OTHER.hex(),"envelope":seal(ok_,CP,jcs(CK))},err="amend-signer")
add("checkpoint-amendment-context","A checkpoint signed in the amendment context does not open as a checkpoint.","checkpoint-open",{"agent":AGENT.hex(),"envelope":seal(ak,AP,jcs(CK))},err="bad-signature")
add("checkpoint-missing-budget","A checkpoint whose spent budgets lack one: refused.","checkpoint-open",{"agent":AGENT.hex(),"envelope":seal(ak,CP,jcs(dict(CK, spent={"max_turns":2})))},err="amend-invalid")
doc={"format":"cordon-conformance-v1","class":"C21","title":"checkpoints and amendments","vectors":vs}
open("conformance/v1/amend.json","w").write(json.dumps(doc,indent=2)+"\n")
print(len(vs))
