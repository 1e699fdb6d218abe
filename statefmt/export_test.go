package statefmt

// ExecutionStepFields exposes to the tests how many fields the encoder's step memo compares.
const ExecutionStepFields = executionStepFields

// DecodeBinaryUnvalidated decodes the layout without checking the state's own rules.
func DecodeBinaryUnvalidated(b []byte) (*HarnessState, error) {
	return decodeBinary(b, string(b), false)
}
