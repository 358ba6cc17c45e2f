# The goodput benchmark's plots from the TSV goodput_fleet writes (scripts/bench-goodput.sh):
#   gnuplot -e "dir='OUT'" scripts/plots/goodput.gp
set terminal svg size 720,420 dynamic font "sans,12" background rgb "white"
set datafile separator "\t"
set key autotitle columnhead
set style data histograms
set style fill solid 0.85 border rgb "black"
set boxwidth 0.6
set grid ytics

set output dir."/goodput-ettr.svg"
set title "ETTR per configuration (productive / wall GPU-time)"
set ylabel "ETTR (%)"
set yrange [0:105]
unset key
plot dir."/goodput-ettr.tsv" using 2:xtic(1) lc rgb "#4c72b0", \
     '' using 0:2:(sprintf("%.2f %%", $2)) with labels offset 0,0.8 notitle

set output dir."/goodput-lost.svg"
set title "GPU-hours lost by cause"
set ylabel "GPU-hours"
set yrange [0:*]
set key outside right top vertical
set style histogram rowstacked
plot for [i=2:7] dir."/goodput-lost.tsv" using i:xtic(1) title columnhead(i)
