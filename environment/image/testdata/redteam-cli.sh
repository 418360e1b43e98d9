#!/bin/sh
# Red-team reproducers for 'cordon image unpack' that need no other user.
# Usage: redteam-cli.sh CORDON LAYOUTS WORK  (LAYOUTS from TestRedteamWriteLayouts)
set -u
CORDON=$1 L=$2 W=$3
rm -rf "$W"; mkdir -p "$W"

echo "== a refused image whose layer makes 25,000 nested directories (open-file limit $(ulimit -n))"
"$CORDON" image unpack --state "$W/s1" "$L/deep" 2>&1 | cut -c1-160
echo "left in the cache: $(ls -A "$W/s1/images")"

echo "== SIGINT 0.5 s into an unpack"
t0=$(date +%s.%N)
"$CORDON" image unpack --state "$W/s2" "$L/slow" >"$W/s2.out" 2>&1 & pid=$!
sleep 0.5; kill -INT $pid; wait $pid; rc=$?
echo "rc=$rc after $(echo "$(date +%s.%N) - $t0" | bc) s; $(tail -1 "$W/s2.out")"

echo "== a manifest blob of 6 GiB (sparse), its index descriptor saying otherwise; run under a 2 GB address-space limit"
cp -a "$L/small" "$W/big"
M=$(grep -o 'sha256:[0-9a-f]\{64\}' "$W/big/index.json" | head -1 | cut -d: -f2)
truncate -s 6G "$W/big/blobs/sha256/$M"
prlimit --as=2000000000 "$CORDON" image unpack --state "$W/s3" "$W/big" 2>&1 | head -2

echo "== index.json a symbolic link to /dev/zero (same limit)"
cp -a "$L/small" "$W/zero"; rm "$W/zero/index.json"; ln -s /dev/zero "$W/zero/index.json"
prlimit --as=2000000000 timeout 60 "$CORDON" image unpack --state "$W/s4" "$W/zero" 2>&1 | head -2

echo "== index.json a FIFO nobody writes (timeout 5 s)"
cp -a "$L/small" "$W/fifo"; rm "$W/fifo/index.json"; mkfifo "$W/fifo/index.json"
timeout 5 "$CORDON" image unpack --state "$W/s5" "$W/fifo"; echo "rc=$? (124: hung)"
rm -rf "$W"
