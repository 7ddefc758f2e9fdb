module github.com/magpiecrawl/magpie/bench/magpie

go 1.26.0

replace (
	github.com/magpiecrawl/magpie => ../../
	github.com/magpiecrawl/magpie/bench => ../
)
