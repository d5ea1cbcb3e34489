#!/usr/bin/env bash
# Prebuilds, on this machine, what scripts/gpu-check.sh runs on a lent GPU
# machine, so that the GPU machine neither compiles (device minutes) nor needs
# the Debian -dev packages (its image has CUDA, CMake and ninja, and nothing
# can be installed there). Writes .gpu-bundle/bundle.tar.xz (git-ignored):
#
#   build-gpu/...            the binaries gpu-check runs (pagellm, the CUDA and
#                            engine tests, test_backend, bench_cuda_kernels)
#                            and the CTest files that list their tests
#   build-gpu/bundle-lib/    the shared libraries they load beyond glibc and
#                            the GPU driver (fmt, PCRE2, httplib, OpenSSL,
#                            libstdc++, the CUDA runtime, ...), found through
#                            the binaries' RPATH ($ORIGIN), so nothing else
#                            there (ctest, python3) sees them; and the hashes
#                            of the sources built, which gpu-check compares
#                            with the tree it runs in (a stale bundle: it builds)
#
# Compiled-in paths (test data, the default model, the build folder) go
# through the link /tmp/pagellm-src, made here to this checkout and there, by
# gpu-check.sh, to the copy of the working tree. Then, with the device tool:
#   run(command="set -o pipefail; scripts/gpu-check.sh 2>&1 | tee $OUT/gpu-check.log;
#       rc=$?; cp build-gpu/gpu-check/*.json $OUT/; exit $rc", carry=[".gpu-bundle"],
#       timeout_s=540)
# The link is one per machine: bundle one checkout at a time.
#
# Usage: scripts/gpu-bundle.sh   (CUDA_ARCH=90: the H100 / H200; JOBS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=/tmp/pagellm-src
ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-2}
ln -sfn "$PWD" "$SRC"
# DT_RPATH (not RUNPATH) so that the bundled libraries' own dependencies
# (httplib's OpenSSL, ...) come from bundle-lib too.
cmake -S "$SRC" -B "$SRC/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGELLM_CUDA=ON \
  -DPAGELLM_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  '-DCMAKE_BUILD_RPATH=$ORIGIN/bundle-lib;$ORIGIN/../bundle-lib' \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags >/dev/null
bins="pagellm tests/test_backend_cuda tests/test_engine tests/test_backend bench/bench_cuda_kernels"
flock /tmp/pagellm-build.lock cmake --build "$SRC/build-gpu" -j "$JOBS" --target $(for b in $bins; do
  basename "$b"
done)

cd build-gpu
rm -rf bundle-lib && mkdir bundle-lib
# Everything ldd resolves but glibc's own libraries (the loader, libc, libm,
# libdl, libpthread, librt) and the GPU driver's, which must be the machine's.
deps=$(for b in $bins; do ldd "$b"; done)
if grep -q "not found" <<<"$deps"; then
  grep "not found" <<<"$deps" | sort -u >&2
  exit 1
fi
awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$deps" | sort -u |
  grep -Ev '/(ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libcuda|libnvidia[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" bundle-lib/; done
echo "$ARCH" >bundle-lib/cuda-arch
(cd .. && git ls-files -z src tests bench cmake CMakeLists.txt | xargs -0 sha256sum) \
  >bundle-lib/sources.sha256
ctest_files=$(find . -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake')
cd ..
mkdir -p .gpu-bundle
tar -cf - $(for b in $bins; do echo "build-gpu/$b"; done) build-gpu/bundle-lib \
  $(for f in $ctest_files; do echo "build-gpu/${f#./}"; done) | xz -6 -T"$JOBS" >.gpu-bundle/bundle.tar.xz
ls -l .gpu-bundle/bundle.tar.xz
echo "tracked + bundle: $(( ($(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) + \
  $(stat -c %s .gpu-bundle/bundle.tar.xz)) / 1048576 )) MiB (the device tool takes 64)"
