package sluice

// This file is a placeholder so that the API compiles while the engine is
// being written; the engine replaces it.

import (
	"context"

	"github.com/sluicemq/sluice/sluicetype"
)

type broker struct{}

var errTODO = &sluicetype.Error{Code: sluicetype.CodeUnsupportedOperation, Message: "not implemented yet"}

func open(cfg Config) (*Broker, error) { return &Broker{impl: &broker{}}, nil }
func (b *broker) close() error         { return nil }
func (b *broker) createQueue(ctx context.Context, name string, attrs, tags map[string]string) (QueueInfo, error) {
	return QueueInfo{}, errTODO
}
func (b *broker) getQueue(name string) (QueueInfo, error) { return QueueInfo{}, errTODO }
func (b *broker) listQueues(prefix string, max int, next string, allow func(string) bool) ([]string, string, error) {
	return nil, "", errTODO
}
func (b *broker) deleteQueue(ctx context.Context, name string) error { return errTODO }
func (b *broker) getQueueAttributes(name string, names []string) (map[string]string, error) {
	return nil, errTODO
}
func (b *broker) setQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	return errTODO
}
func (b *broker) send(ctx context.Context, queue string, in sluicetype.SendInput) (sluicetype.SendResult, error) {
	return sluicetype.SendResult{}, errTODO
}
func (b *broker) sendBatch(ctx context.Context, queue string, in []sluicetype.SendInput) ([]sluicetype.SendResult, []error, error) {
	return nil, nil, errTODO
}
func (b *broker) receive(ctx context.Context, queue string, in sluicetype.ReceiveInput) ([]sluicetype.Message, error) {
	return nil, errTODO
}
func (b *broker) delete(ctx context.Context, queue, rh string) error { return errTODO }
func (b *broker) deleteBatch(ctx context.Context, queue string, rhs []string) ([]error, error) {
	return nil, errTODO
}
func (b *broker) changeVisibility(ctx context.Context, queue, rh string, s int) error { return errTODO }
func (b *broker) changeVisibilityBatch(ctx context.Context, queue string, in []VisibilityChange) ([]error, error) {
	return nil, errTODO
}
func (b *broker) purge(ctx context.Context, queue string) error { return errTODO }
func (b *broker) listDeadLetterSourceQueues(queue string, max int, next string) ([]string, string, error) {
	return nil, "", errTODO
}
func (b *broker) tagQueue(ctx context.Context, queue string, tags map[string]string) error {
	return errTODO
}
func (b *broker) untagQueue(ctx context.Context, queue string, keys []string) error { return errTODO }
func (b *broker) listQueueTags(queue string) (map[string]string, error)             { return nil, errTODO }
func (b *broker) addPermission(ctx context.Context, queue, label string, acct, actions []string) error {
	return errTODO
}
func (b *broker) removePermission(ctx context.Context, queue, label string) error { return errTODO }
func (b *broker) startMoveTask(ctx context.Context, src, dst string, rate int) (string, error) {
	return "", errTODO
}
func (b *broker) listMoveTasks(src string, max int) ([]MoveTask, error) { return nil, errTODO }
func (b *broker) cancelMoveTask(ctx context.Context, h string) (int64, error) {
	return 0, errTODO
}
func (b *broker) queueNameFromARN(arn string) (string, error) { return "", errTODO }
