# Generates conformance/v1/durable.json (class C6). The segment and head
# bytes are written here from docs/SPEC.md §9, not by cordon; ContentIds
# come from `cordon canon id --form raw` (the C1 core). Run from the repo
# root with a built ./cordon.
import json, subprocess
def cid(b):
    if isinstance(b,str): b=b.encode()
    return subprocess.run(["./cordon","canon","id","--form","raw","-"],input=b,capture_output=True,check=True).stdout.decode().strip()
def jcs(o): return json.dumps(o, sort_keys=True, separators=(",",":"), ensure_ascii=True)
MAN, GR, ENV = cid("manifest of the run"), cid("grant set of the run"), cid("environment of the run")
S1, S2 = cid("snapshot at the first park"), cid("snapshot at the second park")
REC = cid("receipt of the first segment")
def seg(kind, **kw):
    d={"type":"cordon.segment.v1","kind":kind,"manifest":kw.pop("manifest",MAN),"grants":kw.pop("grants",GR),"env":kw.pop("env",ENV)}
    d.update(kw); return d
def chain(*segs):
    lines=[]; prev=None
    for i,s in enumerate(segs):
        s=dict(s); s["seq"]=i
        if prev: s["prev"]=prev
        line=jcs(s); lines.append(line); prev=cid(line)
    return "".join(l+"\n" for l in lines), lines
def head(lines, state, energy, idle, parks, snapshot=None, man=MAN, gr=GR, env=ENV):
    h={"type":"cordon.record-head.v1","count":len(lines),"head":cid(lines[-1]),"state":state,"energy_uj":energy,"idle_uj":idle,"parks":parks,"manifest":man,"grants":gr,"env":env}
    if snapshot: h["snapshot"]=snapshot
    return jcs(h)
ex=lambda uj, **kw: seg("execute", energy_uj=uj, **kw)
su=lambda s: seg("suspend", snapshot=s)
re=lambda s, idle, prov="Estimator", ms=60000, **kw: seg("resume", snapshot=s, idle_uj=idle, idle_provenance=prov, parked_ms=ms, **kw)
cl=lambda **kw: seg("close", **kw)
vs=[]; n=[0]
def add(name, desc, op, inp, out=None, err=None):
    n[0]+=1
    v={"id":"C6-%03d-%s"%(n[0],name),"class":"C6","description":desc,"op":op,"input":inp}
    v["expect"]={"error":err} if err else {"output":out,"id":cid(out)}
    vs.append(v)
w,l=chain(ex(1500, receipt=REC))
add("genesis","A run of one execute segment: its head.","record-verify",w,head(l,"running",1500,0,0))
w,l=chain(ex(1500, receipt=REC), su(S1), re(S1, 420), ex(900), cl())
add("park-resume-close","Execute, park, resume, execute, close: the head recomputes from genesis; the park's idle energy is counted apart from the work's.","record-verify",w,head(l,"closed",2400,420,1))
w2,l2=chain(ex(1500), su(S1), re(S1, 420), ex(900), su(S2), re(S2, 1380, "HwShunt", 3600000), ex(50), cl())
add("idle-accumulates","Idle energy accumulates across two parks (measured and estimated).","record-verify",w2,head(l2,"closed",2450,1800,2))
wp,lp=chain(ex(1500), su(S1))
add("parked","A parked record names the snapshot a resume must name.","record-verify",wp,head(lp,"parked",1500,0,1,S1))
w,l=chain(ex(1500), su(S1), cl(idle_uj=77, idle_provenance="Estimator", parked_ms=5000))
add("close-while-parked","A parked run closed without resuming still counts its last park's idle energy.","record-verify",w,head(l,"closed",1500,77,1))
# Tampering with the wire form.
_,lt=chain(ex(1500), su(S1), re(S1, 420), ex(900), cl())
edited=lt[0].replace('"energy_uj":1500','"energy_uj":15')
add("tampered-energy","A segment edited after the fact breaks the next segment's link.","record-verify","".join(x+"\n" for x in [edited]+lt[1:]),err="record-broken")
add("deleted-segment","A deleted segment breaks the chain.","record-verify","".join(x+"\n" for x in lt[:2]+lt[3:]),err="record-broken")
add("reordered","Reordered segments break the chain.","record-verify","".join(x+"\n" for x in [lt[0],lt[2],lt[1]]+lt[3:]),err="record-broken")
add("torn","A last line without its newline is a torn write.","record-verify","".join(x+"\n" for x in lt)[:-1],err="record-broken")
add("not-canonical","A segment not in canonical form is refused.","record-verify",lt[0].replace('{"','{ "',1)+"\n",err="record-broken")
g=json.loads(lt[0]); g["prev"]=cid("nothing"); 
add("genesis-with-prev","The genesis links to nothing.","record-verify",jcs(g)+"\n",err="record-broken")
s1=json.loads(lt[1]); s1["seq"]=2
add("seq-gap","Sequence numbers count from 0 without gaps.","record-verify",lt[0]+"\n"+jcs(s1)+"\n",err="record-broken")
# Well-linked records that break a rule.
w,_=chain(ex(1500), su(S1), re(S2, 420))
add("resume-other-snapshot","Resuming from a snapshot other than the one recorded at suspension is refused.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), su(S1), ex(10))
add("execute-while-parked","Executing while parked is refused.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), cl(), ex(10))
add("append-after-close","Nothing follows a close.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), su(S1), re(S1, 420, manifest=cid("another manifest")))
add("resume-other-manifest","A resume with another manifest is refused.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), su(S1), re(S1, 420, env=cid("a drifted environment")))
add("resume-drifted-environment","A resume offering a drifted environment address is refused.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), su(S1), re(S1, 420, grants=cid("wider grants")))
add("resume-other-grants","A resume under another grant set is refused.","record-verify",w,err="record-refused")
w,_=chain(su(S1))
add("genesis-not-execute","A record starts with an execute.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), su(S1), re(S1, 420, prov="Guess"))
add("idle-provenance","Idle energy says how it was known: HwShunt or Estimator.","record-verify",w,err="record-refused")
w,_=chain(ex(1500), seg("suspend", snapshot=S1, energy_uj=3))
add("suspend-with-energy","A suspend carries no work energy.","record-verify",w,err="record-refused")
# Appends.
def app(rec, s): return jcs({"record":rec,"segment":s})
resume_seg={"kind":"resume","manifest":MAN,"grants":GR,"env":ENV,"snapshot":S1,"idle_uj":420,"idle_provenance":"Estimator","parked_ms":60000}
want=dict(resume_seg); want.update({"type":"cordon.segment.v1","seq":2,"prev":cid(lp[-1])})
add("append-resume","Appending a resume to a parked record: the exact bytes of the new segment, linked to the head.","record-append",app(wp,resume_seg),jcs(want))
bad=dict(resume_seg); bad["snapshot"]=S2
add("append-resume-other-snapshot","Append refuses a resume from another snapshot.","record-append",app(wp,bad),err="record-refused")
add("append-execute-while-parked","Append refuses an execute while parked.","record-append",app(wp,{"kind":"execute","manifest":MAN,"grants":GR,"env":ENV,"energy_uj":1}),err="record-refused")
bad=dict(resume_seg); bad["env"]=cid("a drifted environment")
add("append-resume-drifted-environment","Append refuses a resume in a drifted environment.","record-append",app(wp,bad),err="record-refused")
wc,_=chain(ex(1500), cl())
add("append-after-close","Append refuses anything after close.","record-append",app(wc,{"kind":"execute","manifest":MAN,"grants":GR,"env":ENV,"energy_uj":1}),err="record-refused")
# Integers the record carries exactly: totals stay within 2^53-1 (Append
# refuses, never overflows, what Parse would refuse).
MAXI=2**53-1
wm,_=chain(ex(MAXI), su(S1), re(S1, 1))
add("append-energy-total-past-maxint","Append refuses an execute that would take the record's energy total past 2^53-1.","record-append",app(wm,{"kind":"execute","manifest":MAN,"grants":GR,"env":ENV,"energy_uj":1}),err="record-refused")
w,_=chain(ex(MAXI), su(S1), re(S1, 1), ex(1))
add("energy-total-past-maxint","A record whose energy total passes 2^53-1 is refused.","record-verify",w,err="record-refused")
doc={"format":"cordon-conformance-v1","class":"C6","title":"durable run records","vectors":vs}
open("conformance/v1/durable.json","w").write(json.dumps(doc,indent=2)+"\n")
print(len(vs))
