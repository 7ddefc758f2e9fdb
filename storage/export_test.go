package storage

// MemoryQueueHosts counts the hosts q keeps state for.
func MemoryQueueHosts(q *MemoryQueue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.hosts)
}
