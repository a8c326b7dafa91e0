module gateway-sizer/bench/openloop

go 1.22
