# Sourced by scripts/test.sh: bubblewrap for the sandbox tests (tests/workspace/test_sandbox.py).
#
# Installed when missing and we are root on Debian; otherwise those tests are skipped, and this says so
# up front with the reason, so a green run without them is not mistaken for a checked sandbox.

ensure_bwrap() {
  if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "   installing Debian's bubblewrap package"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  fi
  if ! command -v bwrap >/dev/null 2>&1; then
    echo "   bubblewrap is not installed: the sandbox tests will be SKIPPED (install the bubblewrap package)"
  elif ! bwrap --ro-bind / / --unshare-pid --dev /dev --proc /proc true >/dev/null 2>&1; then
    echo "   bwrap is installed but cannot create namespaces here: the sandbox tests will fail"
  else
    echo "   $(bwrap --version)"
  fi
}
