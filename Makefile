# The two commands of the README. Each first installs what is missing (scripts/install-deps.sh).
#   make example   runs the main example on the default Vulkan device
#   make test      runs the whole test suite with the validation layer on
.PHONY: deps example test

deps:
	@./scripts/install-deps.sh

example: deps
	@echo "vkasync: running the main example (cargo run --release --example tls_pipeline)"
	cargo run --release --example tls_pipeline

test: deps
	@echo "vkasync: running the test suite on the Vulkan device with validation (VKASYNC_VALIDATION=1)"
	VKASYNC_VALIDATION=1 cargo test --all-targets
	@echo "vkasync: again, driving the device as a discrete GPU (staging copies for every upload and read-back)"
	VKASYNC_VALIDATION=1 VKASYNC_TEST_ALWAYS_STAGE=1 cargo test --tests
	VKASYNC_VALIDATION=1 cargo test --doc
