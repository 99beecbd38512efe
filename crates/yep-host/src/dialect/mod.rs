//! Wire dialects. Each adapts its frames to the host's capability model; nothing above this
//! layer knows which wire a server speaks. YEP 1.0 is the one spoken today.

pub mod yep;
