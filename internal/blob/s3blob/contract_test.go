package s3blob

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobtest"
)

func TestContract(t *testing.T) {
	blobtest.Exercise(t, func(t *testing.T) blob.Store { return openTest(t, testOptions(t)) })
}
