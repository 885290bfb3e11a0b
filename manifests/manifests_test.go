package manifests

import (
	"bytes"
	"os"
	"testing"
)

func TestEmbeddedFilesEqualTheShippedFiles(t *testing.T) {
	for _, tc := range []struct {
		path     string
		embedded []byte
	}{
		{"scheduler/scheduler-config.yaml", SchedulerConfig},
		{"descheduler/policy.yaml", DeschedulerPolicy},
	} {
		onDisk, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatalf("read %s: %v", tc.path, err)
		}
		if len(onDisk) == 0 {
			t.Errorf("%s is empty", tc.path)
		}
		if !bytes.Equal(tc.embedded, onDisk) {
			t.Errorf("the embedded copy of %s differs from the file (%d bytes embedded, %d on disk)", tc.path, len(tc.embedded), len(onDisk))
		}
	}
}
