#!/usr/bin/env bash
# The full-disk run of docs/operations.md: on a small ext4 file system (a
# loop device: needs root), fill until the disk alarm refuses sends, drain
# everything through the API, check sends resume without a restart, kill -9,
# restart, and check that every acknowledged send is present and no
# acknowledged delete came back. JUNK=1 makes another process take all but
# 2 MiB of the disk after 300 messages. Needs python3 with boto3.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${SIZE:-512M}
work=$(mktemp -d)
trap 'umount "$work/mnt" 2> /dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/sluice" ./cmd/sluice
truncate -s "$size" "$work/fs.img"
mkfs.ext4 -q -F "$work/fs.img"
mkdir "$work/mnt"
mount -o loop "$work/fs.img" "$work/mnt"
LOG="$work/server.log" python3 scripts/fulldisk.py "$work/sluice" "$work/mnt/data" "$@"
