#!/usr/bin/env bash
# Renders the plots of `hetrain compare` (DIR/accuracy.svg, DIR/split.svg) to PNG with headless
# Chromium, to look at them without a browser or to attach them to a report. Not run by CI.
#   tools/screenshot_compare.sh [DIR]      (default DIR: compare; writes DIR/accuracy.png,
#                                           DIR/split.png)
# Needs Chromium: on Debian 12, as root, `apt-get install -y chromium` (about 100 MB with its
# libraries); CHROMIUM=/path/to/chrome picks another binary. --no-sandbox lets it run as root.
set -euo pipefail
dir=${1:-compare}
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$browser" ]; then
    echo "screenshot_compare: chromium not found; install it (Debian: apt-get install -y chromium)" \
         "or set CHROMIUM" >&2
    exit 1
fi
for name in accuracy split; do
    svg=$dir/$name.svg
    [ -f "$svg" ] || { echo "screenshot_compare: $svg not found (run hetrain compare --out $dir)" >&2; exit 1; }
    # the SVGs are 760 x 460 (their width and height attributes)
    "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=760,460 \
        --screenshot="$(realpath "$dir")/$name.png" "file://$(realpath "$svg")" >/dev/null 2>&1
    [ -s "$dir/$name.png" ] || { echo "screenshot_compare: $browser wrote no $dir/$name.png" >&2; exit 1; }
    echo "$dir/$name.png"
done
