// The second library of the two-library link test (tests/link): plain
// DeltaNet decode, small so that generating and assembling it is quick.
delta.spec @deltanet rule = delta dims = [64x64] io = f16 state = f32
    layout = kv gate = none beta = sigmoid l2norm chunk = 64
    entries = [decode] max_t = 2
