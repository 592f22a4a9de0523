# Source on the GPU machine, from the repository root, with .whl/ carried (`bash bench/wheels.sh` makes it):
#     . bench/device_env.sh && python3 bench/decode_step.py --no-torch
#     . bench/device_env.sh && timeout -s INT 480 python3 -m pytest -q -m gpu tests -n 16 -p no:cacheprovider -k "not smollm2" -rf 2>&1 | tee $OUT/gpu.log
# (SIGINT, not timeout's TERM: pytest then prints its summary, failures named, before the call's limit cuts it.)
# Installs the carried wheels into /tmp/site (no index there) and sets PYTHONPATH, FWDSHIM_GPU=1 (the
# gpu-marked tests run, the simulator stays off) and FWDSHIM_CACHE=/tmp/fc (the kernel cache: a second
# call on the same warm machine finds its kernels compiled).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH="/tmp/site:$PWD" FWDSHIM_GPU=1 PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0 FWDSHIM_CACHE=/tmp/fc
