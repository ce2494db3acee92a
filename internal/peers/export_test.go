package peers

var ConsumerQueues = consumerQueues

var ProcessCPUTime = processCPU
