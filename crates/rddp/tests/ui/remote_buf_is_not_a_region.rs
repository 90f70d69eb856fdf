// What a peer advertised (a RemoteBuf) is not local memory: it cannot be the
// source of a Send.
use rddp::transport::memory_pair;
use rddp::{CompletionQueue, Device, QueuePairBuilder, Quota, RemoteBuf, SendFlags};

fn main() {
    let pd = Device::new().consumer("x", Quota::default()).unwrap().alloc_pd().unwrap();
    let cq = CompletionQueue::new(8);
    let (a, _b) = memory_pair(256);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap().attach(a).unwrap();
    let remote = RemoteBuf { stag: 1, to: 0, len: 8 };
    qp.post_send(1, &remote, 0, 8, SendFlags::default()).unwrap();
}
