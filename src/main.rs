fn main() {
    println!("llmprobe");
}
