#!/bin/sh
# Copies the files cde-run board embeds (board/assets/uplot) from the uPlot
# npm package pinned in package-lock.json. To move to another version:
#   npm install uplot@VERSION --save-exact && ./update.sh
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
mkdir -p ../assets/uplot
cp node_modules/uplot/dist/uPlot.iife.min.js node_modules/uplot/dist/uPlot.min.css node_modules/uplot/LICENSE ../assets/uplot/
