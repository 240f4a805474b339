#!/usr/bin/env bash
# The library products' API documentation (DocC, through swift-docc-plugin): each catalog in
# Sources/<Module>/<Module>.docc is built into OUT/<Module> (default: .build/docs). A warning
# docc gives about a catalog (a link to a symbol that does not exist) fails the run, and so does
# a public symbol a module declares without a documentation comment (each listed with its place).
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
      --output-path "$out/$module" --enable-inherited-docs --experimental-documentation-coverage --coverage-summary-level detailed > "$log" 2>&1; then
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
  # Public symbols the module declares without a comment (its own sources' symbols only: the
  # members the standard library supplies are documented there, shown through inherited docs).
  python3 scripts/undocumented.py "$module" > "$out/$module.undocumented" 2>&1 || true
  if tail -1 "$out/$module.undocumented" | grep -q ': 0 public symbols'; then
    tail -1 "$out/$module.undocumented"
  else
    cat "$out/$module.undocumented"
    echo "error: $module: public symbols without a documentation comment (above)"
    failed=1
  fi
  grep -E '^(Types|Members|Globals) ' "$log" | sed "s/^/$module coverage: /"
done
[ "$failed" = 0 ] && echo "documentation built in $out/ for ${modules[*]}"
exit "$failed"
