// A queue pair that is only prepared (not connected) has no way to post work.
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags};

fn main() {
    let pd = Device::new().consumer("x", Quota::default()).unwrap().alloc_pd().unwrap();
    let cq = CompletionQueue::new(8);
    let mr = pd.register(vec![0; 8], Access::NONE).unwrap();
    let prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_send(1, &mr, 0, 8, SendFlags::default()).unwrap();
}
