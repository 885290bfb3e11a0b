// Package audit is the sandbox's independent auditor. It reads
// kube-apiserver's audit log to learn every pod eviction and delete and who
// asked for it, and keeps its own informers to count each budget's healthy
// pods. It shares no code with the plugins it checks.
package audit
