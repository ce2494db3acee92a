package peers

var ConsumerQueues = consumerQueues
