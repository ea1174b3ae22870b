#!/bin/sh
# Install bubblewrap, the sandbox that code rewards and python graders run model-written code in.
# Without a working one they refuse to run (docs/verifiers.md, "Fail closed"). Never fails the setup:
# where it cannot install, it says so and how.
#
#   bwrap already works                  -> nothing to do
#   root (or passwordless sudo) with apt -> apt-get install bubblewrap; likewise dnf, pacman, zypper
#   anything else                        -> a warning with the command to run
set -u
works() { command -v bwrap >/dev/null 2>&1 && bwrap --ro-bind / / --unshare-all true >/dev/null 2>&1; }
if works; then
    echo "sandbox: bubblewrap works"
    exit 0
fi
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo"; else sudo="none"; fi
    if [ "$sudo" != none ]; then
        if command -v apt-get >/dev/null 2>&1; then
            $sudo apt-get update -qq >/dev/null 2>&1; $sudo apt-get install -y -qq bubblewrap >/dev/null 2>&1
        elif command -v dnf >/dev/null 2>&1; then $sudo dnf install -y -q bubblewrap >/dev/null 2>&1
        elif command -v pacman >/dev/null 2>&1; then $sudo pacman -S --noconfirm bubblewrap >/dev/null 2>&1
        elif command -v zypper >/dev/null 2>&1; then $sudo zypper -q install -y bubblewrap >/dev/null 2>&1
        fi
    fi
fi
if works; then
    echo "sandbox: installed bubblewrap"
elif command -v bwrap >/dev/null 2>&1; then
    echo "WARNING: bubblewrap is installed but cannot create namespaces here (a container without user" \
         "namespaces?): code rewards and python graders will refuse to run. See docs/verifiers.md."
else
    echo "WARNING: bubblewrap was NOT installed (needs root or sudo): code rewards and python graders will" \
         "refuse to run until you run: sudo apt-get install bubblewrap (or dnf/pacman/zypper install bubblewrap)"
fi
exit 0
