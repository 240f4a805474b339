#!/usr/bin/env bash
# The library products' API documentation (DocC, through swift-docc-plugin): each catalog in
# Sources/<Module>/<Module>.docc is built into OUT/<Module> (default: .build/docs). A warning
# docc gives about a catalog (a link to a symbol that does not exist) fails the run; each public
# symbol without a documentation comment is listed as a warning, with a count per module.
#
#   scripts/docs.sh [OUT]
#   swift package --disable-sandbox preview-documentation --target FHIR    # to browse one
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/docs}"
modules=(FHIR FHIRPath CareStore Mapping FHIRClient Gateway)
rm -rf "$out"
mkdir -p "$out"
failed=0
for module in "${modules[@]}"; do
  log="$out/$module.log"
  if ! swift package --allow-writing-to-directory "$out" generate-documentation --target "$module" \
      --output-path "$out/$module" --experimental-documentation-coverage --coverage-summary-level detailed > "$log" 2>&1; then
    cat "$log"
    echo "error: $module: docc failed (above)"
    failed=1
    continue
  fi
  # docc's own findings about the catalog and the comments' links.
  if grep -E '^(warning|error):' "$log" | grep -v "is deprecated"; then
    echo "error: $module: docc warned about its documentation (above)"
    failed=1
  fi
  # Public symbols without a comment: the coverage table's rows whose Abstract column is false
  # (CareKit-style synthesized `==`/`!=` and docc's own groups left out).
  awk -F'|' -v module="$module" '
    NF >= 8 && $3 ~ /false/ && $2 !~ /Collection ?Group|Article|Operator/ {
      path = $NF; sub(/^ *doc:\/\/[^\/]*\/documentation\//, "", path); gsub(/ +$/, "", path)
      kind = $2; gsub(/^ +| +$/, "", kind)
      printf "warning: %s: %s %s has no documentation comment\n", module, tolower(kind), path
      count++
    }
    END { printf "%s: %d public symbols without documentation\n", module, count + 0 }' "$log"
  grep -E '^(Types|Members|Globals) ' "$log" | sed "s/^/$module coverage: /"
done
[ "$failed" = 0 ] && echo "documentation built in $out/ for ${modules[*]}"
exit "$failed"
