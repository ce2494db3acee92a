package peers

var ConsumerQueues = consumerQueues

var (
	StatCPUTicks   = statCPUTicks
	ProcessCPUTime = processCPU
)
