# bench/plot.gp: the plots of `make bench-plot`, from the data files the
# benchmarks leave in bench/out/ (gnuplot, Debian's gnuplot-nox):
#
#   bench/plots/handoff.png       handoff latency CDF per variant, 2 and 4
#                                 processes (bench/handoff.lua)
#   bench/plots/watchdog-cpu.png  the watchdog's CPU time against the number
#                                 of locks held (bench/watchdog_cpu.lua)
#
# run from the repo root: gnuplot bench/plot.gp
set terminal pngcairo size 900,380 font "sans,9"
set encoding utf8
set termoption noenhanced

variants = "redislock-notify redislock-poll redislock-fair redislock-notify-spin redislock-fair-spin spin-poll"
set output "bench/plots/handoff.png"
set multiplot layout 1,2 title "handoff latency under contention (bench/handoff.lua: 1-3 ms holds, pause 0)"
set logscale x
set xrange [0.02:200]
set yrange [0:1]
set grid
set xlabel "handoff latency, ms (log)"
set ylabel "fraction of handoffs ≤ x"
set key bottom right font "sans,8"
do for [procs in "2 4"] {
  set title procs . " processes"
  plot for [v in variants] sprintf("bench/out/handoff-%s-x%s.dat", v, procs) using 1:2 with steps lw 1.5 title v
}
unset multiplot

set output "bench/plots/watchdog-cpu.png"
set multiplot layout 1,2 title "the watchdog's cost against locks held (bench/watchdog_cpu.lua: ttl 3 s, a renewal per lock per second)"
set logscale xy
set xrange [0.5:20000]
set format y "%g"
set yrange [0.005:20]
set xlabel "locks held (log)"
set key top left font "sans,8"
set title "CPU time, % of one core (log)"
set ylabel "% of one core"
plot "bench/out/watchdog-cpu.dat" using 1:2 with linespoints lw 1.5 pt 7 title "client process", \
     "" using 1:7 with linespoints lw 1.5 pt 5 title "redis-server", \
     x * 1e-4 with lines dt 2 lc "gray40" title "1 µs per renewal: grows with the locks due"
set yrange [*:*]
set title "client CPU time per renewal (log)"
set ylabel "µs per renewal"
plot "bench/out/watchdog-cpu.dat" using 1:4 with linespoints lw 1.5 pt 7 title "client process"
unset multiplot
