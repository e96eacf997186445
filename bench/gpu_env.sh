# Shared setup of the GPU scripts (bench/gpu_suite.sh, gpu_parity.sh, gpu_check.sh), sourced from the repo root.
# The device machine has jax, flax, optax, xarray; the rest comes as wheels in .whl/ (crax-bench, mujoco,
# mujoco-mjx, jaxopt, ml-collections, trimesh, glfw, pyopengl, zarr, numcodecs, donfig, google-crc32c, dask,
# partd, locket), installed into $SITE without touching the system's packages.
#
#   gpu_env_install PY SITE LOG   install .whl/*.whl into SITE (SKIP_INSTALL=1: use PY's packages as they are),
#                                 export PYTHONPATH, XLA_PYTHON_CLIENT_MEM_FRACTION (0.9) and PYTHONUNBUFFERED;
#                                 lines appended to LOG; returns 2 when the install fails
#   gpu_env_check PY LOG MODULE.. import each module (its version printed), then jax's devices; returns 3 when
#                                 an import fails

gpu_env_install() {
  local py=$1 site=$2 log=$3
  if [ "${SKIP_INSTALL:-0}" = 1 ]; then
    export PYTHONPATH="$PWD"
  else
    {
      echo "== install .whl -> $site"
      if "$py" -m pip --version >/dev/null 2>&1; then
        "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
          .whl/*.whl || { echo "pip install failed"; exit 2; }
      else  # no pip: a wheel is a zip; none of these has a .data directory, so unpacking is the install
        echo "(no pip: unpacking the wheels)"
        "$py" - "$site" .whl/*.whl <<'EOF' || { echo "unpacking failed"; exit 2; }
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])
EOF
      fi
      ls .whl
    } 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || return 2
    export PYTHONPATH="$site:$PWD"
  fi
  export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}
  export PYTHONUNBUFFERED=1
}

gpu_env_check() {
  local py=$1 log=$2
  shift 2
  {
    echo "== $(date -u +%FT%TZ) setup took $((SECONDS - ${t_start:-0})) s"
    nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
    "$py" - "$@" <<'EOF'
import contextlib, importlib, io, sys
print("python", sys.version.split()[0])
bad = []
for m in sys.argv[1:]:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mod = importlib.import_module(m)
        print(f"  {m:<36} {getattr(mod, '__version__', '')}")
    except Exception as exc:
        bad.append(m)
        print(f"  {m:<36} IMPORT FAILED: {type(exc).__name__}: {exc}")
if "jax" not in bad:
    import jax
    print("jax devices:", jax.devices(), "backend:", jax.default_backend())
sys.exit(1 if bad else 0)
EOF
  } 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "import check failed (see above)" | tee -a "$log"; return 3; }
}
