#!/usr/bin/env bash
# Print the path of a few-label corpus made from Debian's `fortunes` package,
# as TSV (id, truth, folder, body) like fetch-corpus.sh's SpamAssassin file.
# Categories: the fortune files computers, science, politics, art (no off/),
# each cut to its first N fortunes in file order, N the smallest file's count
# (at most 1000), so the classes are balanced. ids 1..n follow the MD5 of
# category and text, which interleaves the classes deterministically (any
# "id % k = r" picks from every class). truth = folder = the category. body:
# the fortune with backspace overstriking removed, newlines and other control
# characters turned into spaces, backslash and tab escaped for \copy text.
# Installs the package (apt-get) when its files are missing. The result is
# cached in $GNB_BENCH_CACHE (default test/bench/out).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
categories=(computers science politics art)
dir=/usr/share/games/fortunes
cache="${GNB_BENCH_CACHE:-$repo/test/bench/out}/fortunes.tsv.gz"
if [ -f "$cache" ]; then echo "$cache"; exit 0; fi
missing=0
for c in "${categories[@]}"; do [ -f "$dir/$c" ] || missing=1; done
if [ "$missing" = 1 ]; then
  command -v apt-get >/dev/null || { echo "the Debian package fortunes is needed ($dir)" >&2; exit 1; }
  echo "installing the Debian package fortunes" >&2
  if ! apt-get install -y -qq --no-install-recommends fortunes >/dev/null 2>&1; then
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends fortunes >/dev/null
  fi
  for c in "${categories[@]}"; do
    [ -f "$dir/$c" ] || { echo "$dir/$c is still missing" >&2; exit 1; }
  done
fi
mkdir -p "$(dirname "$cache")"
tmp="$cache.tmp.$$"
trap 'rm -f "$tmp"' EXIT
perl -MDigest::MD5=md5_hex -e '
  my ($dir, @cats) = @ARGV;
  my %docs;
  for my $c (@cats) {
    open my $f, "<:raw", "$dir/$c" or die "$dir/$c: $!";
    local $/; my $all = <$f>; close $f;
    for my $t (split /^%[ \t]*\r?\n/m, $all) {
      1 while $t =~ s/[^\x08\n]\x08//;        # overstriking: keep the last char
      $t =~ s/\x08//g;
      $t =~ s/[\x00-\x08\x0a-\x1f\x7f]+/ /g;  # newlines etc. -> one space (not tab)
      $t =~ s/^\s+|\s+$//g;
      next if $t eq "" || $t eq "%";
      push @{$docs{$c}}, $t;
    }
  }
  my $n = 1000;
  for my $c (@cats) { $n = @{$docs{$c}} if @{$docs{$c}} < $n; }
  my @rows;
  for my $c (@cats) {
    my @d = @{$docs{$c}}[0 .. $n - 1];
    printf STDERR "%s: %d of %d fortunes\n", $c, $n, scalar @{$docs{$c}};
    push @rows, map { [md5_hex("$c\t$_"), $c, $_] } @d;
  }
  my $id = 0;
  for my $r (sort { $a->[0] cmp $b->[0] or $a->[1] cmp $b->[1] or $a->[2] cmp $b->[2] } @rows) {
    (my $body = $r->[2]) =~ s/\\/\\\\/g;
    $body =~ s/\t/\\t/g;
    print ++$id, "\t$r->[1]\t$r->[1]\t$body\n";
  }' "$dir" "${categories[@]}" | gzip -n > "$tmp"
mv "$tmp" "$cache"
echo "$cache"
